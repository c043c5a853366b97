//===- Manifest.cpp - the op library's kernel manifest --------------------===//

#include "segops/Target/OpLibrary.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "segops/Conversion/LongSegmentKernels.h"
#include "segops/Conversion/SegmentProgram.h"
#include "segops/Dialect/Seg/IR/SegDialect.h"
#include "segrt/KernelABI.h"
#include "segrt/OpLibrary.h"

using namespace mlir;
using namespace mlir::seg;

static std::string typeName(Type type) {
  std::string name;
  llvm::raw_string_ostream os(name);
  type.print(os);
  return name;
}

/// How the runtime combines two tiles' partial totals of an accumulator
/// (the names segrt::parseTotalCombines reads).
static StringRef combiningKindName(arith::AtomicRMWKind kind) {
  switch (kind) {
  case arith::AtomicRMWKind::addf:
    return "add";
  case arith::AtomicRMWKind::maximumf:
    return "max";
  case arith::AtomicRMWKind::minimumf:
    return "min";
  default:
    llvm_unreachable("reductions combine by addf, maximumf or minimumf");
  }
}

/// The host entry points: the kernel, its range, and for segment programs
/// the tile and finish kernels for long segments with the number of totals
/// of each pass.
static llvm::json::Object describeHost(const SegmentProgram &program) {
  std::string name = program.getName().str();
  llvm::json::Object host{
      {"symbol", name},
      {"range", program.mapsRowsOnly() ? "rows" : "segments"}};
  if (std::optional<unsigned> summed = program.summedRowBuffer())
    host["sums_rows_of"] = *summed;
  if (!program.mapsRowsOnly()) {
    llvm::json::Array passTotals, combine;
    for (unsigned pass = 0; pass < program.numPasses; ++pass) {
      passTotals.push_back(program.numReductionComponents(pass));
      for (arith::AtomicRMWKind kind : program.combiningKinds(pass))
        combine.push_back(combiningKindName(kind));
    }
    host["split"] =
        llvm::json::Object{{"rows_symbol",
                            name + std::string(segrt::abi::kHostTileSuffix)},
                           {"finish_symbol",
                            name + std::string(segrt::abi::kHostFinishSuffix)},
                           {"totals", program.numReductionComponents()},
                           {"pass_totals", std::move(passTotals)},
                           {"totals_dtype", typeName(program.elementType)},
                           {"combine", std::move(combine)}};
  }
  return host;
}

/// The GPU launch rule, and for segment programs the kernels for long
/// segments launched first (a warp per tile) and the scratch buffer all
/// of them and the kernel take as their last parameter.
static llvm::json::Object describeGPU(const SegmentProgram &program,
                                      int64_t blockSize) {
  // A warp per window of the fewest 32-row chunks, up to a cap on the
  // segment kernel's warps (then windows grow), or for row maps a step of
  // their loop (gpuRowMapBlockRows); one block at least (to evaluate the
  // segments when there are no rows). Kernels grid-stride, so any grid is
  // correct.
  int64_t rowsPerBlock =
      program.mapsRowsOnly()
          ? program.gpuRowMapBlockRows(blockSize)
          : blockSize * SegmentProgram::kGPUMinChunksPerWindow;
  llvm::json::Object gpu{{"entry", std::string(segrt::abi::entryName(
                                       program.hasLongSegmentKernels()
                                           ? segrt::abi::Entry::GpuSegmentKernel
                                           : segrt::abi::Entry::GpuKernel))},
                         {"block", llvm::json::Array{blockSize, 1, 1}},
                         {"dynamic_shared_bytes", 0},
                         {"grid", llvm::json::Object{{"elements", "rows"},
                                                     {"per_block", rowsPerBlock},
                                                     {"min", 1}}}};
  if (!program.mapsRowsOnly()) {
    llvm::json::Object *grid = gpu.getObject("grid");
    grid->try_emplace("max",
                      SegmentProgram::kGPUSegmentKernelMaxWarps * 32 / blockSize);
    grid->try_emplace("max_from_mean_segment_rows",
                      SegmentProgram::kGPUSegmentKernelCapFromMeanRows);
    gpu["window_chunks"] =
        llvm::json::Object{{"min", SegmentProgram::kGPUMinChunksPerWindow},
                           {"max", SegmentProgram::kGPUMaxChunksPerWindow}};
  }
  if (program.mapsRowsOnly() && !program.splitsFeatures()) {
    // Rows a thread takes a step, and whether a warp moves its rows of
    // odd widths (3-vectors) and its segments' values together
    // (SegmentProgram::gpuStripesRowMap), reading them in whole sectors.
    gpu["rows_per_thread"] = program.gpuRowMapRowsPerUnit();
    gpu["striped_rows"] = program.gpuStripesRowMap();
  }
  if (!program.mapsRowsOnly() && !program.splitsFeatures()) {
    gpu["packed_chunk_rows"] = SegmentProgram::kGPUChunkRows;
    gpu["packed_tail_rows_per_lane"] =
        SegmentProgram::kGPUPackedTailRowsPerLane;
    gpu["packed_tail_from_next_chunk"] = program.gpuPacksTailsFromNextChunk();
    // Whether the tile kernel loads its pieces' rows of odd widths a warp
    // at a time and reduces them as loaded
    // (SegmentProgram::gpuStripedReductions).
    gpu["striped_reductions"] = program.gpuStripesReductions();
    // Whether a packed chunk's lane loads its own row's inputs once for
    // every pass (SegmentProgram::gpuCachesOwnRowInputs).
    gpu["caches_own_rows"] = program.gpuCachesOwnRowInputs();
  }
  // Rows of this many features or more hold them over groups of a warp's
  // lanes, of `feature_lanes` lanes each (0: a row per lane).
  gpu["feature_lanes_from"] = SegmentProgram::kGPUFeatureLanesFrom;
  gpu["feature_lanes"] = program.gpuFeatureLanes();
  // Consecutive features a lane loads and stores at once of the widest
  // split row (1 without split rows).
  gpu["feature_vector_width"] =
      program.gpuFeatureVectorWidth(program.widestRowFeatures());
  // Blocks of columns the kernel's grid runs: C times the rule's blocks.
  gpu["column_blocks"] = program.gpuColumnBlocks();
  SmallVector<LongSegmentLaunch> longLaunches = longSegmentLaunches(program);
  if (!longLaunches.empty()) {
    llvm::json::Array launches;
    for (const LongSegmentLaunch &launch : longLaunches)
      launches.push_back(llvm::json::Object{
          {"kernel", program.getName().str() + launch.kernel.suffix},
          {"pass", launch.pass},
          {"rows_per_unit", launch.kernel.rowsPerUnit(program)},
          {"warps_per_unit", launch.kernel.warpsPerUnit(program)},
          {"column_blocks", launch.kernel.columnBlocks(program)},
          {"min_rows", launch.kernel.minRows(program)}});
    LongSegmentScratch scratch = longSegmentScratch(program);
    gpu["long_segments"] = llvm::json::Object{
        {"launches", std::move(launches)},
        {"tile_rows", program.gpuTileRows()},
        {"long_span_alignment", program.gpuLongSpanAlignment()},
        {"super_tile_rows", SegmentProgram::kGPUSuperTileRows},
        {"scratch_bytes_per_segment", scratch.perSegment},
        {"scratch_bytes_per_tile", scratch.perTile},
        {"scratch_bytes_per_super_tile", scratch.perSuperTile}};
  }
  return gpu;
}

static llvm::json::Object describeKernel(const SegmentProgram &program,
                                         int64_t blockSize) {
  llvm::json::Array buffers;
  for (const KernelBuffer &buffer : program.buffers) {
    llvm::json::Array shape;
    for (const std::string &dim : buffer.shape)
      shape.push_back(dim);
    llvm::json::Object description{
        {"name", buffer.name},
        {"role", buffer.isOutput ? "output" : "input"},
        {"dtype", typeName(buffer.elementType)},
        {"shape", std::move(shape)},
    };
    if (!buffer.isOutput)
      description["read"] = buffer.isRead;
    if (buffer.savedResult >= 0)
      description["saved_result"] = buffer.savedResult;
    if (buffer.sumsBy >= 0) {
      description["sums_by"] = buffer.sumsBy;
      description["into_rows_of"] = buffer.sumsIntoRowsOf;
    }
    buffers.push_back(std::move(description));
  }
  llvm::json::Array gathers;
  for (const TableGather &gather : program.gathers)
    gathers.push_back(llvm::json::Object{{"index", gather.indexBuffer},
                                         {"table", gather.tableBuffer}});
  llvm::json::Array ops;
  program.func.walk([&](Operation *op) {
    if (isa<SegDialect>(op->getDialect()))
      ops.push_back(op->getName().getStringRef().str());
  });
  return llvm::json::Object{
      {"name", program.getName().str()},
      {"ops", std::move(ops)},
      {"dtype", typeName(program.elementType)},
      {"buffers", std::move(buffers)},
      // Second indices: the table buffers read at their values' rows.
      {"gathers", std::move(gathers)},
      {"sizes", llvm::json::Array{"N", "S"}},
      {"passes", program.numPasses},
      {"gpu", describeGPU(program, blockSize)},
      // Host: a call computes segments [begin, end), or rows [begin, end)
      // for programs that only map rows.
      {"host", describeHost(program)},
  };
}

/// The call contract (segrt/KernelABI.h): each entry point's trailing
/// parameters in order, after the buffers.
static llvm::json::Object describeABI() {
  llvm::json::Object abi;
  for (segrt::abi::Entry entry : segrt::abi::kEntries) {
    llvm::json::Array parameters;
    for (const segrt::abi::Parameter &parameter : segrt::abi::signature(entry))
      parameters.push_back(llvm::json::Object{
          {"name", std::string(parameter.name)},
          {"kind", parameter.kind == segrt::abi::ParamKind::Pointer ? "ptr"
                                                                    : "i64"}});
    abi[std::string(segrt::abi::entryName(entry))] = std::move(parameters);
  }
  return abi;
}

FailureOr<llvm::json::Object>
mlir::seg::buildKernelManifest(ModuleOp source, int64_t blockSize) {
  llvm::json::Array kernels;
  for (auto func : source.getOps<func::FuncOp>()) {
    if (!SegmentProgram::isCandidate(func))
      continue;
    FailureOr<SegmentProgram> program = SegmentProgram::analyze(func);
    if (failed(program))
      return failure();
    kernels.push_back(describeKernel(*program, blockSize));
  }
  return llvm::json::Object{{"format", segrt::kManifestFormat},
                            {"version", segrt::kManifestVersion},
                            {"abi", describeABI()},
                            {"kernels", std::move(kernels)}};
}
