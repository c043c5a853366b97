//===- manifest_record.cpp - the one reader of the op library manifest ----===//

#include "manifest_record.h"

#include "segrt/CpuLevel.h"
#include "segrt/OpLibrary.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace segops_python {
namespace {

using nlohmann::json;

int64_t parseExtent(const std::string &symbol) {
  if (symbol == "N")
    return kRows;
  if (symbol == "S")
    return kSegments;
  if (symbol == "?")
    return kAnyRows;
  bool digits = !symbol.empty() && symbol.size() < 18 &&
                std::all_of(symbol.begin(), symbol.end(),
                            [](char c) { return c >= '0' && c <= '9'; });
  if (!digits)
    throw std::invalid_argument("bad buffer extent '" + symbol + "'");
  return std::stoll(symbol);
}

std::string parseDtype(const std::string &name) {
  if (name != "f32" && name != "f64" && name != "i32")
    throw std::invalid_argument("unknown kernel dtype " + name);
  return name;
}

segrt::abi::Entry parseEntry(const std::string &name) {
  for (segrt::abi::Entry entry : segrt::abi::kEntries)
    if (segrt::abi::entryName(entry) == name)
      return entry;
  throw std::invalid_argument("unknown kernel entry point " + name);
}

segrt::GpuProgram parseGpuProgram(const std::string &kernel, const json &gpu) {
  segrt::GpuProgram program;
  program.kernel = kernel;
  program.entry = parseEntry(gpu.at("entry").get<std::string>());
  program.block = gpu.at("block").at(0).get<uint32_t>();
  const json &grid = gpu.at("grid");
  program.gridPerBlock = grid.at("per_block").get<int64_t>();
  program.gridMin = grid.at("min").get<int64_t>();
  program.gridMax = grid.value("max", segrt::kMaxGrid);
  program.gridMaxFromMeanSegmentRows =
      grid.value("max_from_mean_segment_rows", int64_t{0});
  if (program.gridMax < program.gridMin)
    throw std::invalid_argument("gpu grid of " + kernel + ": max " +
                                std::to_string(program.gridMax) +
                                " below min " +
                                std::to_string(program.gridMin));
  if (program.gridMaxFromMeanSegmentRows < 0)
    throw std::invalid_argument(
        "gpu grid of " + kernel + ": negative max_from_mean_segment_rows " +
        std::to_string(program.gridMaxFromMeanSegmentRows));
  auto columnBlocks = [&](const json &entry) {
    int64_t blocks = entry.value("column_blocks", int64_t{1});
    if (blocks < 1 || blocks > 64)
      throw std::invalid_argument("gpu launch of " + kernel +
                                  ": column_blocks " + std::to_string(blocks) +
                                  " outside [1, 64]");
    return blocks;
  };
  program.columnBlocks = columnBlocks(gpu);
  if (gpu.contains("long_segments")) {
    const json &longSegments = gpu["long_segments"];
    for (const json &launch : longSegments.at("launches"))
      program.longSegmentLaunches.push_back(
          {launch.at("kernel").get<std::string>(),
           launch.at("pass").get<int64_t>(),
           launch.at("rows_per_unit").get<int64_t>(),
           launch.at("warps_per_unit").get<int64_t>(),
           launch.at("min_rows").get<int64_t>(), columnBlocks(launch)});
    program.tileRows = longSegments.at("tile_rows").get<int64_t>();
    program.superTileRows = longSegments.at("super_tile_rows").get<int64_t>();
    program.scratchPerSegment =
        longSegments.at("scratch_bytes_per_segment").get<int64_t>();
    program.scratchPerTile =
        longSegments.at("scratch_bytes_per_tile").get<int64_t>();
    program.scratchPerSuperTile =
        longSegments.at("scratch_bytes_per_super_tile").get<int64_t>();
  }
  return program;
}

BufferRecord parseBuffer(const json &entry) {
  BufferRecord buffer;
  buffer.name = entry.at("name").get<std::string>();
  buffer.isOutput = entry.at("role").get<std::string>() == "output";
  buffer.isIndex = buffer.name == "idx";
  buffer.isRead = entry.value("read", true);
  buffer.savedResult = entry.value("saved_result", -1);
  buffer.dtype = parseDtype(entry.at("dtype").get<std::string>());
  for (const json &symbol : entry.at("shape"))
    buffer.shape.push_back(parseExtent(symbol.get<std::string>()));
  if (entry.contains("sums_by")) {
    buffer.sumsBy = entry["sums_by"].get<int>();
    buffer.intoRowsOf = entry.at("into_rows_of").get<int>();
  }
  return buffer;
}

KernelRecord parseKernel(const json &entry) {
  KernelRecord kernel;
  kernel.name = entry.at("name").get<std::string>();
  kernel.dtype = parseDtype(entry.at("dtype").get<std::string>());
  for (const json &buffer : entry.at("buffers"))
    kernel.buffers.push_back(parseBuffer(buffer));
  if (std::count_if(kernel.buffers.begin(), kernel.buffers.end(),
                    [](const BufferRecord &b) { return b.isIndex; }) != 1)
    throw std::invalid_argument("kernel " + kernel.name +
                                " has no single idx buffer");
  if (entry.contains("ops"))
    kernel.ops = entry["ops"].get<std::vector<std::string>>();
  kernel.passes = entry.value("passes", int64_t(1));
  const json &host = entry.at("host");
  kernel.hostSymbol = host.value("symbol", kernel.name);
  kernel.hostRows = host.value("range", "segments") == "rows";
  if (host.contains("split") && host["split"].is_object()) {
    const json &split = host["split"];
    kernel.split = HostSplitRecord{
        split.at("rows_symbol").get<std::string>(),
        split.at("finish_symbol").get<std::string>(),
        split.at("pass_totals").get<std::vector<int64_t>>(),
        split.at("combine").get<std::vector<std::string>>(),
        split.at("totals_dtype").get<std::string>() == "f64"};
  }
  if (host.contains("sums_rows_of") && host["sums_rows_of"].is_number())
    kernel.sumsRowsOf = host["sums_rows_of"].get<int>();
  if (entry.contains("gathers") && entry["gathers"].is_array())
    for (const json &gather : entry["gathers"])
      kernel.gathers.emplace_back(gather.at("index").get<int>(),
                                  gather.at("table").get<int>());
  auto checkPosition = [&](int position) {
    if (position < -1 || position >= static_cast<int>(kernel.buffers.size()))
      throw std::invalid_argument("kernel " + kernel.name +
                                  " names buffer " + std::to_string(position) +
                                  ", which it lacks");
  };
  checkPosition(kernel.sumsRowsOf);
  for (const BufferRecord &buffer : kernel.buffers)
    checkPosition(buffer.sumsBy), checkPosition(buffer.intoRowsOf);
  for (auto [index, table] : kernel.gathers)
    checkPosition(index), checkPosition(table);
  kernel.gpu = parseGpuProgram(kernel.name, entry.at("gpu"));
  kernel.text = entry.dump();
  return kernel;
}

/// Runs `parse`, rethrowing nlohmann's errors as std::invalid_argument
/// (one exception type for a malformed manifest).
template <typename Parse> auto malformedAsInvalid(Parse parse) {
  try {
    return parse();
  } catch (const json::exception &error) {
    throw std::invalid_argument(std::string("malformed segops manifest: ") +
                                error.what());
  }
}

} // namespace

std::vector<int64_t> BufferRecord::extents(int64_t numRows,
                                           int64_t numSegments) const {
  std::vector<int64_t> sizes;
  for (int64_t extent : shape) {
    if (extent == kAnyRows)
      throw std::invalid_argument("buffer " + name +
                                  " has any number of rows");
    sizes.push_back(extent == kRows       ? numRows
                    : extent == kSegments ? numSegments
                                          : extent);
  }
  return sizes;
}

std::vector<std::string> BufferRecord::symbols() const {
  std::vector<std::string> names;
  for (int64_t extent : shape)
    names.push_back(extent == kRows       ? "N"
                    : extent == kSegments ? "S"
                    : extent == kAnyRows  ? "?"
                                          : std::to_string(extent));
  return names;
}

size_t KernelRecord::numOutputs() const {
  return std::count_if(buffers.begin(), buffers.end(),
                       [](const BufferRecord &b) { return b.isOutput; });
}

size_t KernelRecord::numInputs() const {
  return buffers.size() - numOutputs();
}

int KernelRecord::idxPosition() const {
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].isIndex)
      return static_cast<int>(b);
  return -1; // parseKernel ensures there is one
}

int KernelRecord::floatArgumentsBefore(size_t position) const {
  int arguments = 0;
  for (size_t b = 0; b < position && b < buffers.size(); ++b)
    arguments += !buffers[b].isIndex && !buffers[b].isOutput;
  return arguments;
}

std::vector<std::string> KernelRecord::gpuSymbols() const {
  std::vector<std::string> symbols{name};
  for (const auto &launch : gpu.longSegmentLaunches)
    if (std::find(symbols.begin(), symbols.end(), launch.kernel) ==
        symbols.end())
      symbols.push_back(launch.kernel);
  return symbols;
}

const KernelRecord *ManifestRecord::kernel(std::string_view name) const {
  for (const KernelRecord &kernel : kernels)
    if (kernel.name == name)
      return &kernel;
  return nullptr;
}

const HostBuildRecord &chooseHostBuild(const ManifestRecord &manifest) {
  const char *variable = std::getenv("SEGOPS_HOST_CPU");
  std::string wanted = variable ? variable : "";
  wanted.erase(0, wanted.find_first_not_of(" \t"));
  wanted.erase(wanted.find_last_not_of(" \t") + 1);
  std::string names;
  for (const HostBuildRecord &build : manifest.hostBuilds)
    names += (names.empty() ? "'" : ", '") + build.cpu + "'";
  names = "[" + names + "]";
  if (!wanted.empty()) {
    for (const HostBuildRecord &build : manifest.hostBuilds) {
      if (build.cpu != wanted)
        continue;
      if (!segrt::cpuSupports(wanted))
        throw std::invalid_argument("SEGOPS_HOST_CPU='" + wanted +
                                    "': this CPU does not run that build");
      return build;
    }
    throw std::invalid_argument("SEGOPS_HOST_CPU='" + wanted +
                                "': the op library's host builds are " + names);
  }
  for (const HostBuildRecord &build : manifest.hostBuilds)
    if (segrt::cpuSupports(build.cpu))
      return build;
  throw std::runtime_error("this CPU runs none of the op library's host builds " +
                           names);
}

ManifestRecord parseManifest(std::string_view text) {
  return malformedAsInvalid([&] {
    json manifest = json::parse(text);
    if (!manifest.is_object() ||
        manifest.value("format", "") != segrt::kManifestFormat ||
        manifest.value("version", 0) != segrt::kManifestVersion)
      throw std::invalid_argument(
          std::string("not a version ") +
          std::to_string(segrt::kManifestVersion) +
          " segops op library manifest; rebuild segops");
    ManifestRecord record;
    if (manifest.contains("host"))
      for (const json &build : manifest["host"])
        record.hostBuilds.push_back({build.at("cpu").get<std::string>(),
                                     build.at("library").get<std::string>(),
                                     build.value("vector_bits", int64_t(0))});
    if (manifest.contains("ptx"))
      for (const auto &[chip, file] : manifest["ptx"].items())
        record.ptx.emplace(chip, file.get<std::string>());
    for (const json &entry : manifest.at("kernels"))
      record.kernels.push_back(parseKernel(entry));
    return record;
  });
}

ManifestRecord readManifest(const std::string &path) {
  std::ifstream file(path);
  if (!file)
    throw std::runtime_error("the op library's manifest " + path +
                             " is missing; build segops first (`make build`)");
  std::stringstream text;
  text << file.rdbuf();
  try {
    return parseManifest(text.str());
  } catch (const std::invalid_argument &error) {
    throw std::runtime_error(path + ": " + error.what());
  }
}

KernelRecord parseKernelRecord(std::string_view text) {
  return malformedAsInvalid([&] { return parseKernel(json::parse(text)); });
}

std::string packageManifest(std::string_view compiled,
                            const std::vector<HostBuildRecord> &hostBuilds,
                            const std::map<std::string, std::string> &ptx) {
  parseManifest(compiled); // the format, version and kernels are checked
  json manifest = json::parse(compiled);
  json builds = json::array();
  for (const HostBuildRecord &build : hostBuilds)
    builds.push_back({{"cpu", build.cpu},
                      {"library", build.library},
                      {"vector_bits", build.vectorBits}});
  manifest["host"] = std::move(builds);
  manifest["ptx"] = ptx;
  return manifest.dump();
}

} // namespace segops_python
