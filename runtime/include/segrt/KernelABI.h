//===- KernelABI.h - the call contract of generated kernels -----*- C++ -*-===//
//
// Every kernel the compiler generates takes its buffers (one pointer each, in
// the order of the manifest's `buffers`) followed by the trailing parameters
// of its entry point, listed here in order. This header is the one place that
// order is written: the GPU and host lowerings build their signatures from it
// by name, the runtime calls through it, and the manifest records it (its
// `abi` entry) for whoever else reads kernels.
//
// Every trailing parameter is 64 bits wide (an i64, or a pointer on the 64-bit
// targets segops supports), so a caller may pass them as int64_t values.
//
// No MLIR or LLVM dependency: the runtime and the extensions include it.
//
//===----------------------------------------------------------------------===//

#ifndef SEGRT_KERNELABI_H
#define SEGRT_KERNELABI_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace segrt::abi {

/// Every buffer a kernel takes starts at a multiple of this many bytes: the
/// GPU kernels access a lane's features of a split row up to 16 bytes at a
/// time (SegmentProgram::gpuFeatureVectorWidth), so callers copy inputs that
/// start elsewhere (a view at an odd offset).
inline constexpr std::size_t kBufferAlignment = 16;

/// A trailing parameter, by meaning.
enum class Param : uint8_t {
  /// N, the number of rows.
  NumRows,
  /// S, the number of segments.
  NumSegments,
  /// Host segment kernels and row maps: the range [begin, end) of segments
  /// (rows, for row maps) the call computes.
  Begin,
  End,
  /// Host segment kernels: the first row of segment `begin` if the caller
  /// knows it, else -1.
  FirstRow,
  /// Host tile kernels: the tile's rows [rowBegin, rowEnd).
  RowBegin,
  RowEnd,
  /// The pass a long-segment kernel runs.
  Pass,
  /// Host tile and finish kernels: the segment's row count.
  Count,
  /// Host finish kernels: the segment.
  Segment,
  /// Host tile and finish kernels: the segment's totals of earlier passes.
  Totals,
  /// Host tile kernels: the tile's raw totals of its pass.
  Partials,
  /// GPU kernels of segment programs with long-segment kernels: the scratch
  /// buffer they share.
  Scratch,
};

enum class ParamKind : uint8_t { I64, Pointer };

struct Parameter {
  Param param;
  ParamKind kind;
  /// The name the manifest records.
  std::string_view name;
};

/// What an entry point returns.
enum class Result : uint8_t {
  None,
  /// Host kernels: -1 if the kernel saw idx break the contract, else the row
  /// after its segments' rows (0 for row maps).
  I64,
  /// Host tile kernels: 1 if the tile's rows are not all of one segment.
  I32,
};

/// The kinds of entry point.
enum class Entry : uint8_t {
  /// Host: the kernel of a program.
  HostKernel,
  /// Host: one pass of one long segment on a tile of its rows.
  HostTile,
  /// Host: a long segment's outputs from the totals of all its passes.
  HostFinish,
  /// GPU: the kernel of a program without long-segment kernels (row maps).
  GpuKernel,
  /// GPU: the kernel of a segment program, reading the long segments'
  /// scratch.
  GpuSegmentKernel,
  /// GPU: a long-segment kernel, launched before GpuSegmentKernel.
  GpuLongSegment,
};

inline constexpr Entry kEntries[] = {
    Entry::HostKernel,       Entry::HostTile,      Entry::HostFinish,
    Entry::GpuKernel,        Entry::GpuSegmentKernel, Entry::GpuLongSegment};

namespace detail {
using P = Param;
using K = ParamKind;
inline constexpr Parameter kNumRows{P::NumRows, K::I64, "num_rows"};
inline constexpr Parameter kNumSegments{P::NumSegments, K::I64,
                                        "num_segments"};
inline constexpr Parameter kHostKernel[] = {
    kNumRows,
    kNumSegments,
    {P::Begin, K::I64, "begin"},
    {P::End, K::I64, "end"},
    {P::FirstRow, K::I64, "first_row"}};
inline constexpr Parameter kHostTile[] = {kNumRows,
                                          kNumSegments,
                                          {P::RowBegin, K::I64, "row_begin"},
                                          {P::RowEnd, K::I64, "row_end"},
                                          {P::Pass, K::I64, "pass"},
                                          {P::Count, K::I64, "count"},
                                          {P::Totals, K::Pointer, "totals"},
                                          {P::Partials, K::Pointer,
                                           "partials"}};
inline constexpr Parameter kHostFinish[] = {kNumRows,
                                            kNumSegments,
                                            {P::Segment, K::I64, "segment"},
                                            {P::Count, K::I64, "count"},
                                            {P::Totals, K::Pointer, "totals"}};
inline constexpr Parameter kGpuKernel[] = {kNumRows, kNumSegments};
inline constexpr Parameter kGpuSegmentKernel[] = {
    kNumRows, kNumSegments, {P::Scratch, K::Pointer, "scratch"}};
inline constexpr Parameter kGpuLongSegment[] = {
    kNumRows,
    kNumSegments,
    {P::Scratch, K::Pointer, "scratch"},
    {P::Pass, K::I64, "pass"}};
} // namespace detail

/// An entry point's trailing parameters, in order.
struct Signature {
  const Parameter *parameters;
  size_t size;
  Result result;

  constexpr const Parameter *begin() const { return parameters; }
  constexpr const Parameter *end() const { return parameters + size; }
  /// The position of `param` among the trailing parameters, or -1.
  constexpr int position(Param param) const {
    for (size_t i = 0; i < size; ++i)
      if (parameters[i].param == param)
        return static_cast<int>(i);
    return -1;
  }
  constexpr bool has(Param param) const { return position(param) >= 0; }
};

constexpr Signature signature(Entry entry) {
  switch (entry) {
  case Entry::HostKernel:
    return {detail::kHostKernel, std::size(detail::kHostKernel), Result::I64};
  case Entry::HostTile:
    return {detail::kHostTile, std::size(detail::kHostTile), Result::I32};
  case Entry::HostFinish:
    return {detail::kHostFinish, std::size(detail::kHostFinish), Result::None};
  case Entry::GpuKernel:
    return {detail::kGpuKernel, std::size(detail::kGpuKernel), Result::None};
  case Entry::GpuSegmentKernel:
    return {detail::kGpuSegmentKernel, std::size(detail::kGpuSegmentKernel),
            Result::None};
  case Entry::GpuLongSegment:
    return {detail::kGpuLongSegment, std::size(detail::kGpuLongSegment),
            Result::None};
  }
  return {nullptr, 0, Result::None};
}

/// The entry's name in the manifest's `abi`.
constexpr std::string_view entryName(Entry entry) {
  switch (entry) {
  case Entry::HostKernel:
    return "host_kernel";
  case Entry::HostTile:
    return "host_tile";
  case Entry::HostFinish:
    return "host_finish";
  case Entry::GpuKernel:
    return "gpu_kernel";
  case Entry::GpuSegmentKernel:
    return "gpu_segment_kernel";
  case Entry::GpuLongSegment:
    return "gpu_long_segment";
  }
  return "";
}

/// Appended to a program's name to name its host tile and finish kernels.
inline constexpr std::string_view kHostTileSuffix = "__rows";
inline constexpr std::string_view kHostFinishSuffix = "__finish";

/// The most trailing parameters an entry point takes.
constexpr size_t maxTrailing() {
  size_t most = 0;
  for (Entry entry : kEntries)
    most = signature(entry).size > most ? signature(entry).size : most;
  return most;
}

/// The trailing arguments of one call, set by meaning and read in the
/// entry's order: a caller never writes the order down.
///
///   TrailingArguments args(Entry::HostKernel);
///   args.set(Param::NumRows, n).set(Param::NumSegments, s) ...;
///   kernel(pointers..., args[0], ..., args[size - 1]);
class TrailingArguments {
public:
  explicit constexpr TrailingArguments(Entry entry)
      : signature_(signature(entry)) {}

  /// Sets `param` if the entry takes it (else nothing: callers set what any
  /// entry of theirs may take).
  constexpr TrailingArguments &set(Param param, int64_t value) {
    int at = signature_.position(param);
    if (at >= 0)
      values[at] = value;
    return *this;
  }
  constexpr int64_t operator[](size_t i) const { return values[i]; }
  constexpr const int64_t *data() const { return values; }
  constexpr size_t size() const { return signature_.size; }

private:
  Signature signature_;
  int64_t values[maxTrailing()] = {};
};

} // namespace segrt::abi

#endif // SEGRT_KERNELABI_H
