//===- Host.cpp - loading and calling host kernels ------------------------===//

#include "segrt/Host.h"
#include "segrt/Error.h"
#include "segrt/KernelABI.h"
#include "segrt/Parallel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <dlfcn.h>
#include <utility>

using namespace segrt;

std::vector<TotalCombine>
segrt::parseTotalCombines(const std::vector<std::string> &names) {
  std::vector<TotalCombine> kinds;
  for (const std::string &name : names) {
    if (name == "add")
      kinds.push_back(TotalCombine::Add);
    else if (name == "max")
      kinds.push_back(TotalCombine::Max);
    else if (name == "min")
      kinds.push_back(TotalCombine::Min);
    else
      throw Error("segrt: unknown combining kind '" + name +
                  "' (expected add, max or min)");
  }
  return kinds;
}

int64_t segrt::parallelMinRows() {
  return hasWorkerLauncher() ? int64_t(1) << 14 : int64_t(1) << 16;
}

HostLibrary::HostLibrary(const std::string &path) : path(path) {
  handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw Error("segrt: cannot load host kernel library '" + path +
                "': " + dlerror());
}

HostLibrary::~HostLibrary() {
  if (handle)
    dlclose(handle);
}

void *HostLibrary::lookup(const std::string &name) {
  std::lock_guard<std::mutex> lock(symbolsMutex);
  auto it = symbols.find(name);
  if (it != symbols.end())
    return it->second;
  void *symbol = dlsym(handle, name.c_str());
  if (!symbol)
    throw Error("segrt: host kernel '" + name + "' is not in '" + path + "'");
  symbols.emplace(name, symbol);
  return symbol;
}

namespace {
using I64 = int64_t;
using P = void *;
namespace abi = segrt::abi;

/// A host buffer's address as a trailing pointer argument.
template <typename T> int64_t address(T *pointer) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(pointer));
}

// Kernels are plain C functions of their pointer parameters followed by
// scalars; the pointer count picks the function type to call through.
template <typename R, typename... Extra, size_t... Is>
R callWithPointers(void *symbol, const std::vector<uintptr_t> &pointers,
                   std::index_sequence<Is...>, Extra... extra) {
  using Fn = R (*)(decltype((void)Is, P())..., Extra...);
  return reinterpret_cast<Fn>(symbol)(reinterpret_cast<P>(pointers[Is])...,
                                      extra...);
}

template <typename R, size_t Count, typename... Extra>
R callWithCount(void *symbol, const std::vector<uintptr_t> &pointers,
                Extra... extra) {
  return callWithPointers<R>(symbol, pointers,
                             std::make_index_sequence<Count>(), extra...);
}

template <typename R, typename... Extra, size_t... Counts>
R dispatchOnCount(void *symbol, const std::vector<uintptr_t> &pointers,
                  std::index_sequence<Counts...>, Extra... extra) {
  using Call = R (*)(void *, const std::vector<uintptr_t> &, Extra...);
  static constexpr Call calls[] = {&callWithCount<R, Counts + 1, Extra...>...};
  return calls[pointers.size() - 1](symbol, pointers, extra...);
}

/// Calls the kernel at `symbol` as `R(void *..., Extra...)`, a pointer
/// parameter per entry of `pointers`.
template <typename R, typename... Extra>
R callKernelWith(void *symbol, const std::vector<uintptr_t> &pointers,
                 Extra... extra) {
  if (pointers.empty() || pointers.size() > HostLibrary::kMaxPointers)
    throw Error("segrt: host kernels take 1 to " +
                std::to_string(HostLibrary::kMaxPointers) + " pointers, got " +
                std::to_string(pointers.size()));
  return dispatchOnCount<R>(
      symbol, pointers, std::make_index_sequence<HostLibrary::kMaxPointers>(),
      extra...);
}

template <typename R, size_t... Is>
R callKernelWithTrailing(void *symbol, const std::vector<uintptr_t> &pointers,
                         const abi::TrailingArguments &trailing,
                         std::index_sequence<Is...>) {
  return callKernelWith<R>(symbol, pointers, I64(trailing[Is])...);
}

/// Calls the kernel at `symbol`, an entry point of kind `E`, with `pointers`
/// and then `trailing` in the contract's order (every trailing parameter is
/// 64 bits: an i64 and a pointer pass alike).
template <abi::Entry E, typename R = void>
R callKernel(void *symbol, const std::vector<uintptr_t> &pointers,
             const abi::TrailingArguments &trailing) {
  return callKernelWithTrailing<R>(
      symbol, pointers, trailing,
      std::make_index_sequence<abi::signature(E).size>());
}
} // namespace

int64_t segrt::callHostKernel(void *symbol,
                              const std::vector<uintptr_t> &pointers,
                              int64_t numRows, int64_t numSegments,
                              int64_t begin, int64_t end, int64_t firstRow) {
  abi::TrailingArguments trailing(abi::Entry::HostKernel);
  trailing.set(abi::Param::NumRows, numRows)
      .set(abi::Param::NumSegments, numSegments)
      .set(abi::Param::Begin, begin)
      .set(abi::Param::End, end)
      .set(abi::Param::FirstRow, firstRow);
  return callKernel<abi::Entry::HostKernel, I64>(symbol, pointers, trailing);
}

void HostLibrary::call(const std::string &name,
                       const std::vector<uintptr_t> &pointers, int64_t numRows,
                       int64_t numSegments, int64_t begin, int64_t end) {
  callHostKernel(lookup(name), pointers, numRows, numSegments, begin, end);
}

/// The segment holding row `row` of a sorted index, clamped to [0, S].
static int64_t segmentAtRow(const int32_t *idx, int64_t row,
                            int64_t numSegments) {
  return std::clamp<int64_t>(idx[row], 0, numSegments);
}

namespace {
/// A segment long enough to be split into tiles.
struct HeavySegment {
  int64_t segment, rowBegin, rowEnd;
};

/// First row in [lo, hi) whose segment is >= `segment` (any idx content:
/// the answer stays in [lo, hi]).
int64_t lowerBound(const int32_t *idx, int64_t lo, int64_t hi,
                   int64_t segment) {
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (idx[mid] < segment)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// The segments with at least kSplitMinRows rows. Each holds a row that is
/// a multiple of kSplitMinRows, so probing those rows finds them all.
std::vector<HeavySegment> findHeavySegments(const int32_t *idx, int64_t numRows,
                                            int64_t numSegments) {
  constexpr int64_t minRows = HostSplitKernel::kSplitMinRows;
  std::vector<HeavySegment> heavy;
  for (int64_t probe = 0; probe < numRows; probe += minRows) {
    int64_t segment = idx[probe];
    if (segment < 0 || segment >= numSegments ||
        (!heavy.empty() && heavy.back().segment == segment))
      continue;
    int64_t begin = lowerBound(idx, 0, numRows, segment);
    int64_t end = lowerBound(idx, begin, numRows, segment + 1);
    if (end - begin >= minRows)
      heavy.push_back({segment, begin, end});
  }
  return heavy;
}

/// Runs segments [begin, end) from row `firstRow` (the first row of
/// `begin`), except the heavy ones (computed by tiles), in calls whose rows
/// must meet: each call returns the row after its rows, which must be the
/// next heavy segment's first row, whose last row the next call starts
/// after. Returns the row after the last call's rows, or -1 if a call saw a
/// problem or the rows did not meet (idx is then not sorted).
int64_t callSegmentsExcept(void *symbol, const std::vector<uintptr_t> &pointers,
                           int64_t numRows, int64_t numSegments, int64_t begin,
                           int64_t end, int64_t firstRow,
                           const std::vector<HeavySegment> &heavy) {
  bool consistent = true;
  int64_t row = firstRow;
  for (const HeavySegment &segment : heavy) {
    if (segment.segment < begin || segment.segment >= end)
      continue;
    int64_t reached = callHostKernel(symbol, pointers, numRows, numSegments,
                                     begin, segment.segment, row);
    consistent &= reached == segment.rowBegin;
    begin = segment.segment + 1;
    row = segment.rowEnd;
  }
  int64_t reached =
      callHostKernel(symbol, pointers, numRows, numSegments, begin, end, row);
  return consistent ? reached : -1;
}

/// `a` and `b` combined as the kernels combine accumulators of `kind`:
/// arith's addf, maximumf or minimumf (NaN wins; +0 is above -0).
template <typename T> T combineTotals(TotalCombine kind, T a, T b) {
  if (kind == TotalCombine::Add)
    return a + b;
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<T>::quiet_NaN();
  bool bWins = kind == TotalCombine::Max ? b > a : b < a;
  if (a == b) // Only the signs of zeros differ.
    bWins = kind == TotalCombine::Max ? std::signbit(a) : std::signbit(b);
  return bWins ? b : a;
}

/// The heavy segments pass by pass: each pass's tiles over the threads,
/// then its totals combined in tile order into each segment's; then each
/// segment's outputs. Returns false if a tile's rows were not all of its
/// segment (the tile kernel checks its rows against its first row; that row
/// is checked here).
template <typename T>
bool runHeavySegments(const HostSplitKernel &split,
                      const std::vector<uintptr_t> &pointers,
                      const int32_t *idx, int64_t numRows, int64_t numSegments,
                      const std::vector<HeavySegment> &heavy, int numThreads) {
  struct Tile {
    size_t heavy;
    int64_t begin, end;
  };
  std::vector<Tile> tiles;
  for (size_t h = 0; h < heavy.size(); ++h)
    for (int64_t row = heavy[h].rowBegin; row < heavy[h].rowEnd;
         row += HostSplitKernel::kTileRows)
      tiles.push_back(
          {h, row,
           std::min(heavy[h].rowEnd, row + HostSplitKernel::kTileRows)});
  size_t numTotals = split.numTotals();
  if (split.combine.size() != numTotals)
    throw Error("segrt: a split kernel needs a combining kind per total (" +
                std::to_string(numTotals) + "), got " +
                std::to_string(split.combine.size()));
  // Per tile its partials; per segment its totals (all passes).
  std::vector<T> partials(tiles.size() * numTotals);
  std::vector<T> totals(heavy.size() * numTotals, T(0));
  std::vector<char> problems(numThreads, 0);
  size_t passOffset = 0;
  for (size_t pass = 0; pass < split.passTotals.size(); ++pass) {
    runWorkers(numThreads, [&](int k) {
      for (size_t t = k; t < tiles.size(); t += numThreads) {
        const HeavySegment &segment = heavy[tiles[t].heavy];
        bool ownSegment = idx[tiles[t].begin] == segment.segment;
        // 1 if the tile's rows are not all of one valid segment.
        abi::TrailingArguments trailing(abi::Entry::HostTile);
        trailing.set(abi::Param::NumRows, numRows)
            .set(abi::Param::NumSegments, numSegments)
            .set(abi::Param::RowBegin, tiles[t].begin)
            .set(abi::Param::RowEnd, tiles[t].end)
            .set(abi::Param::Pass, static_cast<int64_t>(pass))
            .set(abi::Param::Count, segment.rowEnd - segment.rowBegin)
            .set(abi::Param::Totals,
                 address(totals.data() + tiles[t].heavy * numTotals))
            .set(abi::Param::Partials, address(partials.data() + t * numTotals));
        int32_t problem = callKernel<abi::Entry::HostTile, int32_t>(
            split.rows, pointers, trailing);
        problems[k] |= !ownSegment || problem != 0;
      }
    });
    size_t passEnd = passOffset + split.passTotals[pass];
    // Tiles of one segment are consecutive: its first tile's partials start
    // its totals, the later ones combine in.
    for (size_t t = 0; t < tiles.size(); ++t) {
      bool first = t == 0 || tiles[t - 1].heavy != tiles[t].heavy;
      for (size_t c = passOffset; c < passEnd; ++c) {
        T &total = totals[tiles[t].heavy * numTotals + c];
        T partial = partials[t * numTotals + c];
        total = first ? partial : combineTotals(split.combine[c], total, partial);
      }
    }
    passOffset = passEnd;
  }
  for (size_t h = 0; h < heavy.size(); ++h) {
    abi::TrailingArguments trailing(abi::Entry::HostFinish);
    trailing.set(abi::Param::NumRows, numRows)
        .set(abi::Param::NumSegments, numSegments)
        .set(abi::Param::Segment, heavy[h].segment)
        .set(abi::Param::Count, heavy[h].rowEnd - heavy[h].rowBegin)
        .set(abi::Param::Totals, address(totals.data() + h * numTotals));
    callKernel<abi::Entry::HostFinish>(split.finish, pointers, trailing);
  }
  return std::find(problems.begin(), problems.end(), 1) == problems.end();
}

bool runHeavySegments(const HostSplitKernel &split,
                      const std::vector<uintptr_t> &pointers,
                      const int32_t *idx, int64_t numRows, int64_t numSegments,
                      const std::vector<HeavySegment> &heavy, int numThreads) {
  if (split.isDouble)
    return runHeavySegments<double>(split, pointers, idx, numRows, numSegments,
                                    heavy, numThreads);
  return runHeavySegments<float>(split, pointers, idx, numRows, numSegments,
                                 heavy, numThreads);
}

/// How the calling thread split its last call among workers, kept so that
/// calls allocate nothing once these have grown to the thread count (a call
/// runs its workers and returns before the thread makes another).
struct CallSplit {
  std::vector<int64_t> bounds, firstRows, reached;
  std::vector<char> problems;
};

CallSplit &callSplit() {
  thread_local CallSplit split;
  return split;
}

/// Runs every segment of a segment kernel over up to `numThreads` threads,
/// each taking the segments starting in an even share of the rows (the
/// segment of row N*k/T up to that of row N*(k+1)/T, 0 and S at the ends),
/// told its first row; long segments in tiles. Returns
/// true if idx was sorted and in range: no call or tile saw a problem, and
/// the rows of consecutive calls met and covered [0, N) (so every row was
/// checked by the call computing it).
bool runSegments(void *symbol, const std::vector<uintptr_t> &pointers,
                 const int32_t *idx, int64_t numRows, int64_t numSegments,
                 int numThreads, const HostSplitKernel *split) {
  if (numRows == 0) {
    callHostKernel(symbol, pointers, numRows, numSegments, 0, numSegments, 0);
    return true;
  }
  std::vector<HeavySegment> heavy;
  if (split)
    heavy = findHeavySegments(idx, numRows, numSegments);
  // Threads for the calls (one segment cannot be shared); tiles use all.
  int callThreads = numSegments < 2 ? 1 : numThreads;
  CallSplit &scratch = callSplit();
  std::vector<int64_t> &bounds = scratch.bounds, &firstRows = scratch.firstRows,
                       &reached = scratch.reached;
  bounds.assign(1, 0);
  for (int k = 1; k < callThreads; ++k)
    bounds.push_back(
        std::max(bounds.back(),
                 segmentAtRow(idx, numRows * k / callThreads, numSegments)));
  bounds.push_back(numSegments);
  // Each range's first row, by binary search (any idx: stays in [0, N]).
  firstRows.clear();
  for (int k = 0; k <= callThreads; ++k)
    firstRows.push_back(lowerBound(idx, 0, numRows, bounds[k]));
  reached.assign(callThreads, -1);
  runWorkers(callThreads, [&](int k) {
    reached[k] =
        callSegmentsExcept(symbol, pointers, numRows, numSegments, bounds[k],
                           bounds[k + 1], firstRows[k], heavy);
  });
  bool consistent = firstRows[0] == 0;
  for (int k = 0; k < callThreads; ++k)
    consistent &=
        reached[k] >= 0 &&
        reached[k] == (k + 1 < callThreads ? firstRows[k + 1] : numRows);
  if (!heavy.empty())
    consistent &= runHeavySegments(*split, pointers, idx, numRows, numSegments,
                                   heavy, numThreads);
  return consistent;
}

/// Runs every row of a row map over up to `numThreads` threads, rows split
/// evenly. Returns true if no call saw a problem in idx.
bool runRows(void *symbol, const std::vector<uintptr_t> &pointers,
             int64_t numRows, int64_t numSegments, int numThreads) {
  std::vector<char> &problems = callSplit().problems;
  problems.assign(numThreads, 0);
  runWorkers(numThreads, [&](int k) {
    problems[k] =
        callHostKernel(symbol, pointers, numRows, numSegments,
                       numRows * k / numThreads, numRows * (k + 1) / numThreads,
                       /*firstRow=*/-1) < 0;
  });
  return std::find(problems.begin(), problems.end(), 1) == problems.end();
}

/// Runs a kernel's whole range over up to `numThreads` workers (one below
/// parallelMinRows() rows). Returns true if idx was sorted and in range as
/// far as the kernels saw (see runSegments and runRows).
bool runAll(void *symbol, const std::vector<uintptr_t> &pointers,
            const int32_t *idx, int64_t numRows, int64_t numSegments,
            int numThreads, HostRange range, const HostSplitKernel *split) {
  numThreads = numRows < parallelMinRows() ? 1 : std::max(1, numThreads);
  return range == HostRange::Rows
             ? runRows(symbol, pointers, numRows, numSegments, numThreads)
             : runSegments(symbol, pointers, idx, numRows, numSegments,
                           numThreads, split);
}
} // namespace

void segrt::callHostKernelParallel(void *symbol,
                                   const std::vector<uintptr_t> &pointers,
                                   const int32_t *idx, int64_t numRows,
                                   int64_t numSegments, int numThreads,
                                   HostRange range,
                                   const HostSplitKernel *split) {
  runAll(symbol, pointers, idx, numRows, numSegments, numThreads, range, split);
}

void HostLibrary::callParallel(const std::string &name,
                               const std::vector<uintptr_t> &pointers,
                               const int32_t *idx, int64_t numRows,
                               int64_t numSegments, int numThreads,
                               HostRange range, const HostSplitKernel *split) {
  callHostKernelParallel(lookup(name), pointers, idx, numRows, numSegments,
                         numThreads, range, split);
}

static std::atomic<int64_t> rechecks{0};

int64_t segrt::indexRechecks() {
  return rechecks.load(std::memory_order_relaxed);
}

IndexCheck segrt::checkIndexAndCallHostKernel(
    void *symbol, const std::vector<uintptr_t> &pointers, const int32_t *idx,
    int64_t numRows, int64_t numSegments, int numThreads, HostRange range,
    const HostSplitKernel *split) {
  if (runAll(symbol, pointers, idx, numRows, numSegments, numThreads, range,
             split))
    return {};
  rechecks.fetch_add(1, std::memory_order_relaxed);
  // The kernels saw a problem (or their rows did not meet): a value out of
  // range, first, wherever it is; else, for segment kernels, disorder.
  // (Were there neither, their results stand.)
  IndexCheck outside = checkIndex(idx, /*is64Bit=*/false, numRows,
                                  numSegments, numThreads,
                                  /*requireSorted=*/false);
  if (outside.problem != IndexProblem::None || range == HostRange::Rows)
    return outside;
  return checkIndex(idx, /*is64Bit=*/false, numRows, numSegments, numThreads);
}
