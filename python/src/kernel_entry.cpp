//===- kernel_entry.cpp - an operator variant from a manifest record ------===//
//
// A kernel's variant from its manifest record (manifest_record.h, the one
// reader of the manifest): the op library's (op_library.cpp) and run-time
// compiled kernels' (segops.jit programs, widths the library lacks) alike.
//
//===----------------------------------------------------------------------===//

#include "torch_ops.h"

#include "manifest_record.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace segops_torch {
namespace {

at::ScalarType scalarType(const std::string &dtype) {
  if (dtype == "f32")
    return at::kFloat;
  if (dtype == "f64")
    return at::kDouble;
  return at::kInt; // "i32": the record allows no other
}

} // namespace

std::string readPortablePtx(const segops_python::ManifestRecord &manifest,
                            const std::string &directory) {
  std::string oldest;
  int oldestArchitecture = 0;
  for (const auto &[chip, file] : manifest.ptx) {
    int architecture = std::stoi(chip.substr(chip.find('_') + 1));
    if (oldest.empty() || architecture < oldestArchitecture)
      oldest = file, oldestArchitecture = architecture;
  }
  if (oldest.empty())
    return "";
  std::ifstream stream(directory + "/" + oldest);
  if (!stream)
    throw std::runtime_error("cannot read " + directory + "/" + oldest);
  std::stringstream text;
  text << stream.rdbuf();
  return text.str();
}

Variant variantOf(const segops_python::KernelRecord &record,
                  const SymbolResolver &resolve) {
  Variant variant;
  variant.kernel = record.name;
  variant.symbol = resolve(record.hostSymbol);
  for (const segops_python::BufferRecord &description : record.buffers) {
    Buffer buffer;
    buffer.isOutput = description.isOutput;
    buffer.isIndex = description.isIndex;
    buffer.isRead = description.isRead;
    buffer.savedResult = description.savedResult;
    buffer.dtype = scalarType(description.dtype);
    buffer.shape = description.shape;
    if (description.sumsBy >= 0) {
      buffer.sumsBy = record.floatArgumentsBefore(description.sumsBy);
      buffer.sumsIntoRowsOf = record.floatArgumentsBefore(description.intoRowsOf);
      variant.indexedTables.emplace_back(buffer.sumsBy, buffer.sumsIntoRowsOf);
    }
    variant.buffers.push_back(std::move(buffer));
  }
  for (auto [index, table] : record.gathers)
    variant.indexedTables.emplace_back(record.floatArgumentsBefore(index),
                                       record.floatArgumentsBefore(table));
  variant.range =
      record.hostRows ? segrt::HostRange::Rows : segrt::HostRange::Segments;
  if (record.split) {
    variant.split.rows = resolve(record.split->rowsSymbol);
    variant.split.finish = resolve(record.split->finishSymbol);
    variant.split.passTotals = record.split->passTotals;
    variant.split.combine = segrt::parseTotalCombines(record.split->combine);
    // From the manifest, not the variant's key: JIT programs register
    // under "jit" whatever their dtype.
    variant.split.isDouble = record.split->totalsDouble;
  }
  variant.gpu = record.gpu;
  variant.gpuModules = libraryGpuModules();
  variant.savedForBackward.assign(record.numInputs() - 1, true);
  if (record.sumsRowsOf >= 0)
    variant.summedFloatArgument = record.floatArgumentsBefore(record.sumsRowsOf);
  return variant;
}

} // namespace segops_torch
