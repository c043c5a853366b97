//===- run_package.cpp - run an exported segops model from C++ -------------===//
//
//   run_package MODEL.pt2 PROGRAMS_DIR INPUTS.pt OUTPUTS.pt
//
// Loads an AOTInductor package (segops.export.package) with libtorch's
// AOTIModelPackageLoader, registers the segops programs it calls, runs it
// on the tensors of INPUTS.pt (a list saved by torch.save) and writes its
// outputs to OUTPUTS.pt (torch.load reads them). No Python interpreter:
// the segops operators come from libsegops_ops.so, linked into this
// program.
//
//===----------------------------------------------------------------------===//

#include "segops_deploy.h"

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

namespace {

std::vector<char> readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(file), {}};
}

std::vector<at::Tensor> readTensors(const std::string &path) {
  c10::IValue value = torch::jit::pickle_load(readFile(path));
  std::vector<at::Tensor> tensors;
  for (const c10::IValue &element :
       value.isTuple() ? value.toTupleRef().elements().vec()
                       : value.toListRef().vec())
    tensors.push_back(element.toTensor());
  return tensors;
}

void writeTensors(const std::string &path,
                  const std::vector<at::Tensor> &tensors) {
  // A tuple: a typed list would carry TorchScript type tags, which
  // torch.load refuses with weights_only.
  std::vector<c10::IValue> elements(tensors.begin(), tensors.end());
  std::vector<char> bytes =
      torch::jit::pickle_save(c10::ivalue::Tuple::create(std::move(elements)));
  std::ofstream file(path, std::ios::binary);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file)
    throw std::runtime_error("cannot write " + path);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 5) {
    std::cerr << "usage: " << argv[0]
              << " MODEL.pt2 PROGRAMS_DIR INPUTS.pt OUTPUTS.pt\n";
    return 2;
  }
  try {
    int64_t programs = segops::loadPrograms(argv[2]);
    torch::inductor::AOTIModelPackageLoader loader(argv[1]);
    std::vector<at::Tensor> outputs = loader.run(readTensors(argv[3]));
    writeTensors(argv[4], outputs);
    std::cout << "ran " << argv[1] << " (" << programs
              << " segops program levels): " << outputs.size()
              << " outputs\n";
  } catch (const c10::Error &error) { // without the C++ backtrace
    std::cerr << "run_package: " << error.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception &error) {
    std::cerr << "run_package: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
