//===- kernel_entry.cpp - the one reader of a manifest kernel entry --------===//
//
// A kernel's variant from its manifest entry as lib/Target/Manifest.cpp
// writes it: the op library's (op_library.cpp) and run-time compiled
// kernels' (segops.jit programs, widths the library lacks) alike.
//
//===----------------------------------------------------------------------===//

#include "torch_ops.h"

#include "gpu_program.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>

namespace segops_torch {
namespace {

int64_t parseExtent(const std::string &symbol) {
  return symbol == "N"   ? kRows
         : symbol == "S" ? kSegments
         : symbol == "?" ? kAnyRows
                         : std::stoll(symbol);
}

at::ScalarType parseDtype(const std::string &name) {
  if (name == "f32")
    return at::kFloat;
  if (name == "f64")
    return at::kDouble;
  if (name == "i32")
    return at::kInt;
  throw std::invalid_argument("unknown kernel dtype " + name);
}

} // namespace

Variant parseKernelEntry(const nlohmann::json &entry,
                        const SymbolResolver &resolve) {
  Variant variant;
  variant.kernel = entry.at("name").get<std::string>();
  const nlohmann::json &host = entry.at("host");
  variant.symbol = resolve(host.value("symbol", variant.kernel));
  const nlohmann::json &buffers = entry.at("buffers");
  for (const nlohmann::json &description : buffers) {
    Buffer buffer;
    buffer.isOutput = description.at("role").get<std::string>() == "output";
    buffer.isIndex = description.at("name").get<std::string>() == "idx";
    buffer.isRead = description.value("read", true);
    buffer.dtype = parseDtype(description.at("dtype").get<std::string>());
    for (const nlohmann::json &symbol : description.at("shape"))
      buffer.shape.push_back(parseExtent(symbol.get<std::string>()));
    variant.buffers.push_back(std::move(buffer));
  }
  // Buffers before a position, but idx and outputs, are the float
  // arguments before it.
  auto floatArgument = [&](size_t position) {
    int argument = 0;
    for (size_t b = 0; b < position; ++b)
      argument += !variant.buffers[b].isIndex && !variant.buffers[b].isOutput;
    return argument;
  };
  for (size_t b = 0; b < variant.buffers.size(); ++b) {
    const nlohmann::json &description = buffers[b];
    if (!description.contains("sums_by"))
      continue;
    Buffer &buffer = variant.buffers[b];
    buffer.sumsBy = floatArgument(description["sums_by"].get<size_t>());
    buffer.sumsIntoRowsOf =
        floatArgument(description.at("into_rows_of").get<size_t>());
    variant.indexedTables.emplace_back(buffer.sumsBy, buffer.sumsIntoRowsOf);
  }
  if (entry.contains("gathers") && entry["gathers"].is_array())
    for (const nlohmann::json &gather : entry["gathers"])
      variant.indexedTables.emplace_back(
          floatArgument(gather.at("index").get<size_t>()),
          floatArgument(gather.at("table").get<size_t>()));
  variant.range = host.value("range", "segments") == "rows"
                      ? segrt::HostRange::Rows
                      : segrt::HostRange::Segments;
  if (host.contains("split") && host["split"].is_object()) {
    const nlohmann::json &split = host["split"];
    variant.split.rows = resolve(split.at("rows_symbol").get<std::string>());
    variant.split.finish =
        resolve(split.at("finish_symbol").get<std::string>());
    variant.split.passTotals =
        split.at("pass_totals").get<std::vector<int64_t>>();
    variant.split.combine = segrt::parseTotalCombines(
        split.at("combine").get<std::vector<std::string>>());
    // From the manifest, not the variant's key: JIT programs register
    // under "jit" whatever their dtype.
    variant.split.isDouble = split.at("totals_dtype").get<std::string>() ==
                             "f64";
  }
  variant.gpu = segops_python::gpuProgram(variant.kernel, entry.at("gpu"));
  variant.gpuModules = libraryGpuModules();
  variant.savedForBackward.assign(
      std::count_if(variant.buffers.begin(), variant.buffers.end(),
                    [](const Buffer &buffer) {
                      return !buffer.isOutput && !buffer.isIndex;
                    }),
      true);
  if (host.contains("sums_rows_of") && host["sums_rows_of"].is_number())
    variant.summedFloatArgument =
        floatArgument(host["sums_rows_of"].get<size_t>());
  return variant;
}

} // namespace segops_torch
