//===- RegisterCaps.cpp - ptxas's register ladder over PTX text -----------===//
//
// ptxas gives each kernel the registers it sees fit, spilling to reach an
// occupancy of its own choosing, or keeping more than half occupancy
// allows. A `.maxnreg` directive on a kernel's entry moves it. The NVPTX
// back end prints nvvm.maxnreg as nothing but that directive (last of the
// entry's performance directives), so the caps are set in the PTX text, and
// only the kernels whose cap changed are assembled again: no second run of
// LLVM, and the text is the same as with nvvm.maxnreg set on the kernel.
//
//===----------------------------------------------------------------------===//

#include "PTXText.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::seg;

namespace {
/// What ptxas's -v report says of one kernel.
struct KernelRegisters {
  unsigned registers = 0;
  bool spills = false;
};
using RegisterReport = llvm::StringMap<KernelRegisters>;
} // namespace

// Registers per SM, allocated per warp in units of 256 (per thread, in
// multiples of 8), at most 255 a thread; 2,048 threads per SM (sm_50 to
// sm_90), so half occupancy is 1,024.
static constexpr unsigned kRegistersPerSM = 65536;
static constexpr unsigned kMostPerThread = 255;
static constexpr unsigned kHalfSMThreads = 1024;
/// Registers per thread are allocated in multiples of this.
static constexpr unsigned kRegisterUnit = 8;

/// The most registers per thread at which `blocks` blocks of `threads`
/// threads fit an SM.
static unsigned capForBlocks(unsigned blocks, unsigned threads) {
  return std::min(kRegistersPerSM / (blocks * threads) / kRegisterUnit *
                      kRegisterUnit,
                  kMostPerThread);
}

static unsigned blockThreads(int64_t blockSize) {
  return std::max<int64_t>(blockSize, 32);
}

/// The register caps to try, in order, for a kernel ptxas spills in at
/// `registers` registers without a cap: per occupancy step from the one
/// `registers` allows down to one block, the step's cap and then 8 fewer
/// (if still above the step before and `registers`; at one block, 255
/// only). ptxas allocates differently under a cap than without one, and
/// not monotonically: a kernel spilling without a cap at 64 registers may
/// spill nothing capped at 64, and one spilling capped at 80 nothing at 72
/// (the same occupancy).
static SmallVector<unsigned> spillFreeCandidates(unsigned registers,
                                                 int64_t blockSize) {
  unsigned threads = blockThreads(blockSize);
  SmallVector<unsigned> caps;
  unsigned previous = 0;
  for (unsigned blocks = kRegistersPerSM / threads; blocks >= 1; --blocks) {
    unsigned cap = capForBlocks(blocks, threads);
    if (cap == previous)
      continue;
    if (cap >= registers) {
      caps.push_back(cap);
      // The last step keeps the most registers.
      if (blocks > 1 && cap - 8 > previous && cap - 8 >= registers)
        caps.push_back(cap - 8);
    }
    previous = cap;
  }
  return caps;
}

/// The most registers of the occupancy step below `registers` (the
/// largest cap for a whole number of blocks of `blockSize` threads that
/// is below it), or 0 if none is.
static unsigned stepBelow(unsigned registers, int64_t blockSize) {
  unsigned threads = blockThreads(blockSize);
  for (unsigned blocks = 1; blocks <= kRegistersPerSM / threads; ++blocks)
    if (unsigned cap = capForBlocks(blocks, threads); cap < registers)
      return cap;
  return 0;
}

/// The most registers at which blocks of `blockSize` threads fill half an
/// SM's threads (64 for any block size dividing 1,024).
static unsigned halfOccupancyCap(int64_t blockSize) {
  unsigned threads = blockThreads(blockSize);
  return capForBlocks(llvm::divideCeil(kHalfSMThreads, threads), threads);
}

/// Parses ptxas's -v report: per kernel "Function properties for NAME",
/// "N bytes stack frame, N bytes spill stores, N bytes spill loads", "Used N
/// registers, ...".
static RegisterReport parseReport(StringRef text) {
  RegisterReport report;
  static constexpr StringLiteral kProperties = "Function properties for ";
  static constexpr StringLiteral kUsed = "Used ";
  StringRef function;
  bool spills = false;
  SmallVector<StringRef> lines;
  text.split(lines, '\n');
  for (StringRef line : lines) {
    if (size_t at = line.find(kProperties); at != StringRef::npos) {
      function = line.drop_front(at + kProperties.size()).trim();
      spills = false;
    } else if (line.contains("spill stores")) {
      SmallVector<StringRef> counts;
      line.split(counts, ',');
      for (StringRef count : counts) {
        uint64_t bytes = 0;
        StringRef digits = count.trim();
        spills |= count.contains("spill") &&
                  !digits.consumeInteger(10, bytes) && bytes > 0;
      }
    } else if (size_t at = line.find(kUsed);
               at != StringRef::npos && !function.empty()) {
      unsigned registers = 0;
      StringRef digits = line.drop_front(at + kUsed.size());
      if (!digits.consumeInteger(10, registers))
        report[function] = {registers, spills};
      function = StringRef();
    }
  }
  return report;
}

/// ptxas's report of `ptx`'s kernels for `chip`.
static FailureOr<RegisterReport> runPtxas(Location loc, StringRef ptxas,
                                          StringRef chip, StringRef ptx) {
  SmallString<128> input, report, cubin;
  int fd = -1;
  if (llvm::sys::fs::createTemporaryFile("segops", "ptx", fd, input) ||
      llvm::sys::fs::createTemporaryFile("segops-ptxas", "txt", report) ||
      llvm::sys::fs::createTemporaryFile("segops", "cubin", cubin))
    return emitError(loc, "cannot create temporary files for ptxas");
  llvm::FileRemover removeInput(input), removeReport(report),
      removeCubin(cubin);
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << ptx;
  }
  // A bare name is looked up on PATH, as a shell would.
  std::string program = ptxas.str();
  if (!ptxas.contains('/'))
    if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(ptxas))
      program = *found;
  std::string arch = ("-arch=" + chip).str();
  SmallVector<StringRef> args = {program, arch, "-v", input, "-o", cubin};
  std::optional<StringRef> redirects[] = {StringRef(""), StringRef(report),
                                          StringRef(report)};
  std::string error;
  int status = llvm::sys::ExecuteAndWait(program, args, /*Env=*/std::nullopt,
                                         redirects, /*SecondsToWait=*/0,
                                         /*MemoryLimit=*/0, &error);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      llvm::MemoryBuffer::getFile(report);
  if (status != 0 || !text) {
    std::string why = text ? (*text)->getBuffer().take_back(2000).trim().str()
                           : std::string();
    if (why.empty())
      why = error.empty() ? "exit status " + std::to_string(status) : error;
    return emitError(loc, "ptxas (")
           << ptxas << ") failed on the generated PTX for " << chip << ": "
           << why;
  }
  return parseReport((*text)->getBuffer());
}

/// Sets kernel `name`'s `.maxnreg` in `ptx` to `cap` (0: none). The entry's
/// performance directives lie between its parameter list's `)` line and
/// its body's `{` line; `.maxnreg` goes last, where the back end puts it.
static LogicalResult setRegisterCap(Location loc, std::string &ptx,
                                    StringRef name, unsigned cap) {
  StringRef text = ptx;
  size_t entry = text.find((".entry " + name + "(").str());
  size_t parameters =
      entry == StringRef::npos ? entry : text.find("\n)\n", entry);
  size_t body = parameters == StringRef::npos
                    ? parameters
                    : text.find("\n{\n", parameters + 2);
  if (body == StringRef::npos)
    return emitError(loc, "no entry of kernel '")
           << name << "' in the generated PTX";
  size_t directives = parameters + 3, end = body + 1;
  std::string kept;
  SmallVector<StringRef> lines;
  text.slice(directives, end).split(lines, '\n', /*MaxSplit=*/-1,
                                    /*KeepEmpty=*/false);
  for (StringRef line : lines)
    if (!line.starts_with(".maxnreg "))
      kept += (line + "\n").str();
  if (cap)
    kept += ".maxnreg " + std::to_string(cap) + "\n";
  ptx.replace(directives, end - directives, kept);
  return success();
}

/// `ptx` with only the kernels `names` (for ptxas to assemble them alone),
/// or all of it where it holds more than one module's kernels (functions,
/// or several headers).
static std::string kernelsOnly(StringRef ptx, ArrayRef<std::string> names) {
  FailureOr<PTXText> split = splitPTX(ptx);
  if (failed(split) || ptx.count(".version") != 1 || ptx.contains(".func"))
    return ptx.str();
  llvm::StringSet<> wanted;
  for (const std::string &name : names)
    wanted.insert(name);
  std::string text = split->header.str();
  for (auto [name, kernel] : split->kernels)
    if (wanted.contains(name))
      text += kernel;
  return text;
}

/// ptxas's report of the kernels `names` of `ptx`, each required in it.
static FailureOr<RegisterReport>
reportOn(Location loc, StringRef ptxas, StringRef chip, StringRef ptx,
         ArrayRef<std::string> names) {
  FailureOr<RegisterReport> report =
      runPtxas(loc, ptxas, chip, kernelsOnly(ptx, names));
  if (failed(report))
    return failure();
  for (const std::string &name : names)
    if (!report->contains(name))
      return emitError(loc, "ptxas reported nothing of kernel '")
             << name << "'";
  return report;
}

FailureOr<std::string> mlir::seg::capRegisters(Location loc, std::string ptx,
                                               StringRef ptxas, StringRef chip,
                                               int64_t blockSize) {
  FailureOr<RegisterReport> first = runPtxas(loc, ptxas, chip, ptx);
  if (failed(first))
    return failure();
  // Kernels in text order, so that the text does not depend on the report's.
  SmallVector<std::string> kernels;
  if (FailureOr<PTXText> split = splitPTX(ptx); succeeded(split))
    for (auto [name, text] : split->kernels)
      kernels.push_back(name.str());
  else
    for (auto &entry : *first)
      kernels.push_back(entry.getKey().str());

  // Spilling kernels: the next of their candidate caps until one spills
  // nothing (or none is left).
  llvm::StringMap<SmallVector<unsigned>> candidates;
  RegisterReport report = *first;
  SmallVector<std::string> raised;
  do {
    raised.clear();
    for (const std::string &name : kernels) {
      auto reported = report.find(name);
      if (reported == report.end() || !reported->second.spills)
        continue;
      auto [left, isNew] = candidates.try_emplace(name);
      if (isNew)
        left->second =
            spillFreeCandidates(reported->second.registers, blockSize);
      if (left->second.empty())
        continue;
      unsigned cap = left->second.front();
      left->second.erase(left->second.begin());
      if (failed(setRegisterCap(loc, ptx, name, cap)))
        return failure();
      raised.push_back(name);
    }
    if (!raised.empty()) {
      FailureOr<RegisterReport> again =
          reportOn(loc, ptxas, chip, ptx, raised);
      if (failed(again))
        return failure();
      report = std::move(*again);
    }
  } while (!raised.empty());

  // Kernels that never spilled: below half occupancy, capped at half
  // occupancy; at most one allocation unit past an occupancy step, at the
  // step (ptxas lands there from small changes to a kernel); each kept
  // where ptxas then spills nothing.
  unsigned half = halfOccupancyCap(blockSize);
  SmallVector<std::string> tried;
  for (const std::string &name : kernels) {
    KernelRegisters kernel = first->lookup(name);
    if (kernel.spills)
      continue;
    unsigned cap = 0;
    if (kernel.registers > half)
      cap = half;
    else if (unsigned step = stepBelow(kernel.registers, blockSize);
             step && kernel.registers - step <= kRegisterUnit)
      cap = step;
    if (!cap)
      continue;
    if (failed(setRegisterCap(loc, ptx, name, cap)))
      return failure();
    tried.push_back(name);
  }
  if (tried.empty())
    return ptx;
  FailureOr<RegisterReport> capped = reportOn(loc, ptxas, chip, ptx, tried);
  if (failed(capped))
    return failure();
  for (const std::string &name : tried)
    if (capped->lookup(name).spills &&
        failed(setRegisterCap(loc, ptx, name, 0)))
      return failure();
  return ptx;
}
