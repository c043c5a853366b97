//===- GpuSimulator.cpp - run GPU kernels on the CPU, for tests -----------===//
//
// See segrt/GpuSimulator.h. One block at a time: its threads are fibers
// (ucontext), run round-robin until each waits at a collective or exits;
// then every collective whose participants have all arrived completes, and
// the round repeats. A round in which nothing runs and nothing completes is
// a deadlock, reported with where each waiting lane is.
//
//===----------------------------------------------------------------------===//

#include "segrt/GpuSimulator.h"
#include "segrt/Host.h"
#include "segrt/KernelABI.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>

namespace {
constexpr int kWarpSize = 32;
constexpr size_t kStackBytes = 64 * 1024;
// As many pointers as host kernels take, and the most trailing arguments an
// entry point takes.
constexpr int kMaxArguments =
    segrt::HostLibrary::kMaxPointers + segrt::abi::maxTrailing();

enum class State { Runnable, Waiting, Exited };
enum class Collective { Shuffle, Ballot, Barrier };

struct SimThread {
  ucontext_t context;
  State state = State::Runnable;
  Collective collective = Collective::Shuffle;
  int32_t site = -1;
  int32_t mode = 0, offset = 0, width = 0;
  uint32_t mask = 0;
  int64_t bits = 0;
  int64_t result = 0;
};

constexpr int64_t kSectorBytes = 32;

/// One warp instruction being gathered: its lanes' accesses.
struct WarpAccess {
  bool isStore = false;
  int64_t lanes = 0;
  /// (address, bytes) of each lane; duplicates are removed when folded.
  std::vector<std::pair<int64_t, int32_t>> accesses;
};

/// What the trace keeps per thread of the running block.
struct LaneTrace {
  std::unordered_map<int32_t, int64_t> executions; // per site
  int64_t pendingLoads = 0;
  int64_t rounds = 0;
};

/// The memory traffic of one launch, gathered block by block.
class LaunchTrace {
public:
  LaunchTrace(int32_t loadsPerRound, int64_t gridSize, int64_t blockSize)
      : loadsPerRound(loadsPerRound), lanes(blockSize) {
    totals.gridSize = gridSize;
    totals.blockSize = blockSize;
  }

  void access(int thread, int64_t address, int32_t bytes, bool isStore,
              int32_t site) {
    LaneTrace &lane = lanes[thread];
    int64_t execution = lane.executions[site]++;
    Key key{thread / kWarpSize, site, execution};
    WarpAccess &warpAccess = open[key];
    warpAccess.isStore = isStore;
    ++warpAccess.lanes;
    warpAccess.accesses.emplace_back(address, bytes);
    if (!isStore)
      ++lane.pendingLoads;
  }

  /// A lane reached a collective or exited: its loads since the last one
  /// end a dependent chain.
  void endRound(int thread) {
    LaneTrace &lane = lanes[thread];
    lane.rounds += (lane.pendingLoads + loadsPerRound - 1) / loadsPerRound;
    lane.pendingLoads = 0;
  }

  /// Folds a finished block's warp instructions and rounds into the totals.
  void endBlock() {
    for (auto &[key, warpAccess] : open)
      fold(warpAccess);
    open.clear();
    for (size_t warp = 0; warp * kWarpSize < lanes.size(); ++warp) {
      int64_t rounds = 0;
      for (size_t lane = 0; lane < kWarpSize; ++lane)
        rounds = std::max(rounds, lanes[warp * kWarpSize + lane].rounds);
      totals.warpRounds += rounds;
      totals.maxWarpRounds = std::max(totals.maxWarpRounds, rounds);
      ++totals.warps;
    }
    for (LaneTrace &lane : lanes)
      lane = LaneTrace();
    if (loadSectors.size() > kCompactAt)
      compact(loadSectors);
    if (storeSectors.size() > kCompactAt)
      compact(storeSectors);
  }

  SegsimTraffic finish() {
    compact(loadSectors);
    compact(storeSectors);
    totals.distinctLoadSectors = static_cast<int64_t>(loadSectors.size());
    totals.distinctStoreSectors = static_cast<int64_t>(storeSectors.size());
    return totals;
  }

private:
  struct Key {
    int32_t warp, site;
    int64_t execution;
    bool operator==(const Key &other) const {
      return warp == other.warp && site == other.site &&
             execution == other.execution;
    }
  };
  struct KeyHash {
    size_t operator()(const Key &key) const {
      return std::hash<int64_t>()(key.execution * 1000003 +
                                  (static_cast<int64_t>(key.site) << 5) +
                                  key.warp);
    }
  };
  static constexpr size_t kCompactAt = size_t(1) << 24;

  static void compact(std::vector<int64_t> &sectors) {
    std::sort(sectors.begin(), sectors.end());
    sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
  }

  void fold(WarpAccess &warpAccess) {
    auto &accesses = warpAccess.accesses;
    std::sort(accesses.begin(), accesses.end());
    accesses.erase(std::unique(accesses.begin(), accesses.end()),
                   accesses.end());
    std::vector<int64_t> sectors;
    int64_t useful = 0;
    for (auto [address, bytes] : accesses) {
      useful += bytes;
      for (int64_t sector = address / kSectorBytes;
           sector <= (address + bytes - 1) / kSectorBytes; ++sector)
        sectors.push_back(sector);
    }
    std::sort(sectors.begin(), sectors.end());
    sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
    int64_t count = static_cast<int64_t>(sectors.size());
    std::vector<int64_t> &distinct =
        warpAccess.isStore ? storeSectors : loadSectors;
    distinct.insert(distinct.end(), sectors.begin(), sectors.end());
    if (warpAccess.isStore) {
      ++totals.storeInstructions;
      totals.storeLanes += warpAccess.lanes;
      totals.storeUsefulBytes += useful;
      totals.storeSectors += count;
    } else {
      ++totals.loadInstructions;
      totals.loadLanes += warpAccess.lanes;
      totals.loadUsefulBytes += useful;
      totals.loadSectors += count;
    }
  }

  int32_t loadsPerRound;
  SegsimTraffic totals{};
  std::vector<LaneTrace> lanes;
  std::unordered_map<Key, WarpAccess, KeyHash> open;
  std::vector<int64_t> loadSectors, storeSectors;
};

/// The traced launches (segsim_trace), from any thread.
std::mutex traceMutex;
std::atomic<int32_t> traceLoadsPerRound{0};
std::vector<SegsimTraffic> &tracedLaunches() {
  static auto *launches = new std::vector<SegsimTraffic>();
  return *launches;
}
/// The grids the next traced launches run on (segsim_trace_grids).
std::vector<int64_t> &tracedGrids() {
  static auto *grids = new std::vector<int64_t>();
  return *grids;
}

struct Simulation {
  void *kernel = nullptr;
  std::vector<int64_t> arguments;
  int64_t blockId = 0, gridDim = 0, blockDim = 0;
  std::vector<SimThread> threads;
  SimThread *running = nullptr;
  ucontext_t scheduler;
  std::string error;
  /// Set while tracing.
  std::unique_ptr<LaunchTrace> trace;

  int runningThread() const { return static_cast<int>(running - threads.data()); }
};

thread_local Simulation *current = nullptr;

Simulation &simulation() {
  if (!current) {
    std::fprintf(stderr, "segsim: a simulated kernel ran outside "
                         "segsim_launch\n");
    std::abort();
  }
  return *current;
}

template <size_t... Is>
void callWith(void *kernel, const int64_t *args, std::index_sequence<Is...>) {
  using Fn = void (*)(decltype((void)Is, int64_t())...);
  reinterpret_cast<Fn>(kernel)(args[Is]...);
}

// Pointers and i64s travel in the same registers and stack slots (x86-64
// SysV), so a kernel of k parameters is called as one of k i64s.
template <size_t... Counts>
void callKernel(void *kernel, const std::vector<int64_t> &args,
                std::index_sequence<Counts...>) {
  ((args.size() == Counts
        ? callWith(kernel, args.data(), std::make_index_sequence<Counts>())
        : void()),
   ...);
}

void threadMain() {
  Simulation &sim = simulation();
  callKernel(sim.kernel, sim.arguments,
             std::make_index_sequence<kMaxArguments + 1>());
  if (sim.trace)
    sim.trace->endRound(sim.runningThread());
  sim.running->state = State::Exited;
  // uc_link returns to the scheduler.
}

void waitAt(Collective collective, int32_t site) {
  Simulation &sim = simulation();
  SimThread &thread = *sim.running;
  if (sim.trace)
    sim.trace->endRound(sim.runningThread());
  thread.state = State::Waiting;
  thread.collective = collective;
  thread.site = site;
  swapcontext(&thread.context, &sim.scheduler);
}

uint32_t shuffleMask(int32_t width) {
  return width >= kWarpSize ? ~0u : (1u << width) - 1;
}

// PTX shfl.sync with segmask 0: the source lane and whether it is used.
std::pair<int, bool> shuffleSource(int lane, int32_t mode, int32_t offset,
                                   int32_t width) {
  int clamp = mode == SEGSIM_UP ? kWarpSize - width : width - 1;
  int source = lane;
  bool valid = false;
  switch (mode) {
  case SEGSIM_UP:
    source = lane - offset;
    valid = source >= clamp;
    break;
  case SEGSIM_DOWN:
    source = lane + offset;
    valid = source <= clamp;
    break;
  case SEGSIM_XOR:
    source = lane ^ (offset & (kWarpSize - 1));
    valid = source <= clamp;
    break;
  case SEGSIM_IDX:
    source = offset & (kWarpSize - 1);
    valid = source <= clamp;
    break;
  }
  return {valid ? source : lane, valid};
}

std::string describeWarp(const Simulation &sim, int warp) {
  std::string text;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const SimThread &thread = sim.threads[warp * kWarpSize + lane];
    char item[64];
    if (thread.state == State::Exited)
      std::snprintf(item, sizeof(item), " %d:exited", lane);
    else
      std::snprintf(item, sizeof(item), " %d:site%d", lane, thread.site);
    text += item;
  }
  return text;
}

/// Completes the warp collective lane `first` waits at, if all of its
/// participants wait there. Returns true if it completed; sets sim.error
/// on a malformed collective.
bool completeWarpCollective(Simulation &sim, int warp, int first) {
  SimThread *lanes = &sim.threads[warp * kWarpSize];
  const SimThread &leader = lanes[first];
  uint32_t mask = leader.collective == Collective::Shuffle
                      ? shuffleMask(leader.width)
                      : leader.mask;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const SimThread &thread = lanes[lane];
    bool member = (mask >> lane) & 1;
    bool here = thread.state == State::Waiting &&
                thread.collective == leader.collective &&
                thread.site == leader.site;
    if (here && !member) {
      sim.error = "lane " + std::to_string(lane) + " of warp " +
                  std::to_string(warp) + " runs collective site " +
                  std::to_string(leader.site) + " outside its member mask";
      return false;
    }
    if (member && !here)
      return false;
    if (here && thread.collective == Collective::Shuffle &&
        (thread.width != leader.width || thread.mode != leader.mode)) {
      sim.error = "lanes of warp " + std::to_string(warp) +
                  " disagree on the mode or width of shuffle site " +
                  std::to_string(leader.site);
      return false;
    }
  }
  if (leader.collective == Collective::Ballot) {
    uint32_t votes = 0;
    for (int lane = 0; lane < kWarpSize; ++lane)
      if ((mask >> lane) & 1 && lanes[lane].bits)
        votes |= 1u << lane;
    for (int lane = 0; lane < kWarpSize; ++lane)
      if ((mask >> lane) & 1)
        lanes[lane].result = static_cast<int32_t>(votes);
  } else {
    for (int lane = 0; lane < kWarpSize; ++lane) {
      if (!((mask >> lane) & 1))
        continue;
      SimThread &thread = lanes[lane];
      int source =
          shuffleSource(lane, thread.mode, thread.offset, thread.width).first;
      if (source < 0 || source >= kWarpSize || !((mask >> source) & 1)) {
        sim.error = "lane " + std::to_string(lane) + " of warp " +
                    std::to_string(warp) + " reads lane " +
                    std::to_string(source) + " outside the member mask";
        return false;
      }
      thread.result = lanes[source].bits;
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane)
    if ((mask >> lane) & 1)
      lanes[lane].state = State::Runnable;
  return true;
}

/// Completes every collective whose participants have all arrived.
bool completeCollectives(Simulation &sim) {
  bool completed = false;
  int32_t barrierSite = -1;
  bool barrierReady = true, anyBarrier = false;
  for (SimThread &thread : sim.threads) {
    if (thread.state == State::Exited)
      continue;
    if (thread.state != State::Waiting ||
        thread.collective != Collective::Barrier) {
      barrierReady = false;
      continue;
    }
    if (anyBarrier && thread.site != barrierSite)
      barrierReady = false;
    anyBarrier = true;
    barrierSite = thread.site;
  }
  if (anyBarrier && barrierReady) {
    for (SimThread &thread : sim.threads)
      if (thread.state == State::Waiting)
        thread.state = State::Runnable;
    completed = true;
  }

  int warps = static_cast<int>(sim.blockDim / kWarpSize);
  for (int warp = 0; warp < warps && sim.error.empty(); ++warp) {
    for (int lane = 0; lane < kWarpSize && sim.error.empty(); ++lane) {
      const SimThread &thread = sim.threads[warp * kWarpSize + lane];
      if (thread.state == State::Waiting &&
          thread.collective != Collective::Barrier)
        completed |= completeWarpCollective(sim, warp, lane);
    }
  }
  return completed;
}

/// Runs block `sim.blockId` to completion; false (with sim.error) on a
/// deadlock or a malformed collective.
bool runBlock(Simulation &sim, char *stacks) {
  for (int64_t t = 0; t < sim.blockDim; ++t) {
    SimThread &thread = sim.threads[t];
    thread = SimThread();
    getcontext(&thread.context);
    thread.context.uc_stack.ss_sp = stacks + t * kStackBytes;
    thread.context.uc_stack.ss_size = kStackBytes;
    thread.context.uc_link = &sim.scheduler;
    makecontext(&thread.context, threadMain, 0);
  }
  for (;;) {
    bool live = false;
    for (SimThread &thread : sim.threads) {
      if (thread.state == State::Runnable) {
        sim.running = &thread;
        swapcontext(&sim.scheduler, &thread.context);
      }
      live |= thread.state != State::Exited;
    }
    if (!live) {
      if (sim.trace)
        sim.trace->endBlock();
      return true;
    }
    if (!completeCollectives(sim) || !sim.error.empty()) {
      if (sim.error.empty()) {
        sim.error = "deadlock in block " + std::to_string(sim.blockId) +
                    ": threads wait at collectives that cannot complete "
                    "(divergent lanes, or lanes that exited);";
        for (int warp = 0; warp < sim.blockDim / kWarpSize; ++warp)
          sim.error += " warp " + std::to_string(warp) + ":" +
                       describeWarp(sim, warp) + ";";
      }
      return false;
    }
  }
}
} // namespace

extern "C" {

int segsim_launch(void *kernel, const uint64_t *pointers, int numPointers,
                  const int64_t *trailing, int numTrailing, int64_t gridSize,
                  int64_t blockSize,
                  int reverseBlocks, char *error, size_t errorSize) {
  auto fail = [&](const std::string &message) {
    if (errorSize) {
      std::snprintf(error, errorSize, "segsim: %s", message.c_str());
    }
    return 1;
  };
  if (current)
    return fail("segsim_launch called from a simulated kernel");
  if (traceLoadsPerRound.load()) {
    std::lock_guard<std::mutex> lock(traceMutex);
    size_t index = tracedLaunches().size();
    if (index < tracedGrids().size() && tracedGrids()[index] > 0)
      gridSize = tracedGrids()[index];
  }
  if (blockSize < kWarpSize || blockSize > 1024 || blockSize % kWarpSize)
    return fail("block size must be a multiple of 32 up to 1024, not " +
                std::to_string(blockSize));
  if (gridSize < 1)
    return fail("grid size must be positive, not " + std::to_string(gridSize));
  if (numPointers < 0 || numTrailing < 0 ||
      numPointers + numTrailing > kMaxArguments)
    return fail("too many kernel arguments");

  Simulation sim;
  sim.kernel = kernel;
  for (int i = 0; i < numPointers; ++i)
    sim.arguments.push_back(static_cast<int64_t>(pointers[i]));
  for (int i = 0; i < numTrailing; ++i)
    sim.arguments.push_back(trailing[i]);
  sim.gridDim = gridSize;
  sim.blockDim = blockSize;
  sim.threads.resize(blockSize);
  if (int32_t loadsPerRound = traceLoadsPerRound.load())
    sim.trace =
        std::make_unique<LaunchTrace>(loadsPerRound, gridSize, blockSize);

  size_t stackBytes = static_cast<size_t>(blockSize) * kStackBytes;
  void *stacks = mmap(nullptr, stackBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stacks == MAP_FAILED)
    return fail("cannot allocate fiber stacks");

  current = &sim;
  bool ok = true;
  for (int64_t i = 0; i < gridSize && ok; ++i) {
    sim.blockId = reverseBlocks ? gridSize - 1 - i : i;
    ok = runBlock(sim, static_cast<char *>(stacks));
  }
  current = nullptr;
  // Fibers left waiting after an error are abandoned: kernel frames own
  // nothing, so freeing their stacks is enough.
  munmap(stacks, stackBytes);
  if (ok && sim.trace) {
    SegsimTraffic traffic = sim.trace->finish();
    std::lock_guard<std::mutex> lock(traceMutex);
    if (traceLoadsPerRound.load())
      tracedLaunches().push_back(traffic);
  }
  return ok ? 0 : fail(sim.error);
}

void segsim_trace(int32_t loadsPerRound) {
  std::lock_guard<std::mutex> lock(traceMutex);
  if (loadsPerRound > 0)
    tracedLaunches().clear();
  tracedGrids().clear();
  traceLoadsPerRound.store(std::max(loadsPerRound, 0));
}

void segsim_trace_grids(const int64_t *grids, int64_t count) {
  std::lock_guard<std::mutex> lock(traceMutex);
  tracedGrids().assign(grids, grids + std::max<int64_t>(count, 0));
}

int64_t segsim_trace_count(void) {
  std::lock_guard<std::mutex> lock(traceMutex);
  return static_cast<int64_t>(tracedLaunches().size());
}

int32_t segsim_trace_record(int64_t index, SegsimTraffic *record) {
  std::lock_guard<std::mutex> lock(traceMutex);
  if (index < 0 || index >= static_cast<int64_t>(tracedLaunches().size()))
    return 1;
  *record = tracedLaunches()[index];
  return 0;
}

int64_t segsim_thread_id() {
  Simulation &sim = simulation();
  return sim.running - sim.threads.data();
}

int64_t segsim_block_id() { return simulation().blockId; }
int64_t segsim_block_dim() { return simulation().blockDim; }
int64_t segsim_grid_dim() { return simulation().gridDim; }

int64_t segsim_shuffle(int32_t mode, int64_t bits, int32_t offset,
                       int32_t width, int32_t site) {
  SimThread &thread = *simulation().running;
  thread.mode = mode;
  thread.bits = bits;
  thread.offset = offset;
  thread.width = width;
  waitAt(Collective::Shuffle, site);
  return thread.result;
}

int32_t segsim_shuffle_valid(int32_t mode, int32_t offset, int32_t width) {
  int lane = static_cast<int>(segsim_thread_id() % kWarpSize);
  return shuffleSource(lane, mode, offset, width).second;
}

int32_t segsim_ballot(int32_t mask, int32_t predicate, int32_t site) {
  SimThread &thread = *simulation().running;
  thread.mask = static_cast<uint32_t>(mask);
  thread.bits = predicate != 0;
  waitAt(Collective::Ballot, site);
  return static_cast<int32_t>(thread.result);
}

void segsim_barrier(int32_t site) { waitAt(Collective::Barrier, site); }

void segsim_access(int64_t address, int32_t bytes, int32_t isStore,
                   int32_t site) {
  Simulation &sim = simulation();
  if (sim.trace)
    sim.trace->access(sim.runningThread(), address, bytes, isStore != 0, site);
}
}
