//===- torch_ops.h - shared parts of the segops PyTorch kernels -*- C++ -*-===//
//
// What the CPU (torch_ops.cpp) and CUDA (torch_ops_cuda.cpp) kernels of the
// segops operators share: the description of each operator level and its
// kernels (read from the op library's manifest by op_library.cpp), and the
// generic argument checks. Nothing here needs Python: the operator library
// (libsegops_ops.so) runs in a process without an interpreter, and the
// Python package attaches its hooks (error wording, widths compiled at run
// time, PTX per device) through the _torchops module.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_PYTHON_TORCH_OPS_H
#define SEGOPS_PYTHON_TORCH_OPS_H

#include "index_cache.h"
#include "manifest_record.h"
#include "segrt/Cuda.h"
#include "segrt/GpuLauncher.h"
#include "segrt/Host.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>
#include <torch/library.h>

#include <functional>
#include <map>
#include <shared_mutex>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace segops_torch {

/// One pointer parameter of a kernel, from the manifest.
struct Buffer {
  bool isOutput = false;
  bool isIndex = false;
  bool isRead = true;
  at::ScalarType dtype = at::kFloat;
  /// Per dimension: an extent, or kRows (N), kSegments (S) or kAnyRows
  /// (a table read at random rows: any length); parsed once from the
  /// manifest's symbols.
  std::vector<int64_t> shape;
  /// A seg.scatter_sum output: the kernel writes N rows, which are summed
  /// by the second index that is float argument `sumsBy` into as many rows
  /// as float argument `sumsIntoRowsOf` has (the manifest's buffer
  /// positions, mapped to arguments once). -1 for other buffers.
  int sumsBy = -1;
  int sumsIntoRowsOf = -1;
  /// An input that is the level below's output #savedResult (the
  /// manifest's saved_result); -1 else.
  int savedResult = -1;
};

/// Where a kernel's GPU code loads from, and the modules loaded from it:
/// one per device, never unloaded (kernels may run until exit). The op
/// library's variants share one (libraryGpuModules); each segops.jit
/// program level has its own.
class GpuModules {
public:
  /// Returns a CUDA device's PTX text; called once per device.
  using PtxSource = std::function<std::string(int device)>;
  void setPtxSource(PtxSource source);
  /// Run the kernels on the simulated CUDA driver from this image
  /// (segrt::simulatorImage); "" stops.
  void setSimulatorImage(const std::string &image);

  /// The module on CUDA device `device`.
  segrt::CudaModule &onDevice(int device);
  /// The simulated driver's module, or null unless an image was set.
  segrt::CudaModule *simulated();

private:
  std::mutex mutex;
  PtxSource ptxSource;
  std::map<int, std::unique_ptr<segrt::CudaModule>> modules;
  std::unique_ptr<segrt::CudaModule> simulator;
};

/// The op library's GPU modules (PTX from the library's directory, or from
/// the source the Python package sets; with SEGOPS_SIMULATE_GPU the
/// simulated library).
std::shared_ptr<GpuModules> libraryGpuModules();

/// One kernel of an operator level: a dtype and row width.
struct Variant {
  std::string kernel;
  void *symbol = nullptr;
  std::vector<Buffer> buffers;
  /// What a call's [begin, end) counts (rows for kernels that only map rows).
  segrt::HostRange range = segrt::HostRange::Segments;
  /// Tile and finish kernels for long segments, if the kernel has them
  /// (split.rows non-null: segment programs).
  segrt::HostSplitKernel split;
  /// How it launches on a GPU (the manifest's `gpu` entry), and from where.
  segrt::GpuProgram gpu;
  std::shared_ptr<GpuModules> gpuModules;
  /// Per float argument: whether the next level's kernel reads it (what the
  /// backward must save).
  std::vector<bool> savedForBackward;
  /// The float argument whose rows the kernel only sums by idx (the
  /// manifest's sums_rows_of, a buffer), or -1: an unsorted index may then
  /// run by chunks.
  int summedFloatArgument = -1;
  /// Second indices (int32 buffers other than idx) and the tables read at
  /// their values (seg.gather_rows), as float argument positions; with
  /// the scatter outputs' (sumsBy, sumsIntoRowsOf) pairs: every second
  /// index the runtime checks against a table's rows.
  std::vector<std::pair<size_t, size_t>> indexedTables;
};

/// Where a level's output `k` gets its shape: N or S rows (kRows or
/// kSegments), then the features of float argument `featuresOf` (a
/// gradient has its argument's) or, if -1, the fixed `features`.
struct OutputShape {
  int64_t rows = 0;
  int featuresOf = -1;
  std::vector<int64_t> features;
};

/// The overload of a library level whose kernels take saved results
/// (segops::<level>.saved); its default overload recomputes them.
constexpr const char *kSavedOverload = "saved";

/// One level of an operator (`segops::segmented_sum_grad` is level 1 of
/// segmented_sum).
struct OperatorLevel {
  std::string name;
  std::string overload; // "" (the default) or kSavedOverload
  /// segops::<name>[.<overload>], as the dispatcher registers it.
  std::string qualifiedName() const {
    return overload.empty() ? name : name + "." + overload;
  }
  size_t numFloats = 0;
  size_t numOutputs = 0;
  std::map<std::string, Variant> variants; // by "f32_w3"
  std::string backward;                    // the next level; "" for the last
  int derivativeOrder = 0;                 // 0: the op itself
  /// The op's own float arguments (level 0's): the rest are what each
  /// level adds (the saved results the next reads, and cotangents).
  size_t numArguments = 0;
  /// The outputs the backward (the next level) takes after this level's
  /// float arguments, in order: its autograd node saves them.
  std::vector<size_t> savedResults;
  std::optional<c10::OperatorHandle> backwardOp; // resolved at registration
  /// Per output, where its shape comes from (the Meta kernel's shapes).
  std::vector<OutputShape> outputShapes;

  /// Hooks a Python caller attaches (set_level_hooks), read under the lock.
  /// validator(floats, idx, numSegments) raises the error the user sees for
  /// arguments the kernel rejects (else the generic message stands); the
  /// forward's Meta kernel calls it too, on data-less tensors;
  /// variantProvider(key) makes a variant the op library does not ship (a
  /// row width compiled at run time), or nullopt.
  using Validator = std::function<void(at::TensorList, const at::Tensor &,
                                       const c10::SymInt &)>;
  using VariantProvider =
      std::function<std::optional<Variant>(const std::string &key)>;
  void setHooks(Validator validator, VariantProvider provider);
  Validator validator() const;
  /// Adds a variant the op library does not ship (a row width compiled
  /// ahead, shipped with an exported model); a key it has stays as it is.
  void provide(const std::string &key, Variant variant);

  /// Variants made by the provider, added while other threads look up:
  /// guarded (std::map keeps references to its elements valid).
  mutable std::shared_mutex providedMutex;
  mutable std::map<std::string, Variant> provided;
  Validator validatorHook;
  VariantProvider variantProvider;
};


/// The variant key ("f32_w3") of a level whose first float argument is
/// `first`.
std::string variantKey(const at::Tensor &first);

/// The variant of `level` for `key` ("f32_w64"): a shipped one, or one made
/// by the level's provider (once); null if there is none.
const Variant *findVariant(const OperatorLevel &level, const std::string &key);

using segops_python::kAnyRows;
using segops_python::kRows;
using segops_python::kSegments;

int64_t extent(int64_t dimension, int64_t numRows, int64_t numSegments);

/// Calls the Python validator with the operator's arguments (it raises the
/// error for bad input, and checks idx's content where that is asked for).
void callValidator(const OperatorLevel &level, at::TensorList floats,
                   const at::Tensor &idx, int64_t numSegments);

/// Calls the validator; if it accepts the arguments, raises a generic error
/// (a check here that the validator lacks: still never run the kernel).
[[noreturn]] void reportInvalid(const OperatorLevel &level,
                                at::TensorList floats, const at::Tensor &idx,
                                int64_t numSegments,
                                const std::string &problem);

/// The kernel of `level` for these arguments, or an error.
const Variant &selectVariant(const OperatorLevel &level, at::TensorList floats,
                             const at::Tensor &idx, int64_t numSegments);

/// Empty if every tensor matches its buffer and lies on idx's device, which
/// must be of type `deviceType`; else what does not.
std::string mismatch(const Variant &variant, at::TensorList floats,
                     const at::Tensor &idx, int64_t numSegments,
                     c10::DeviceType deviceType);

/// idx as the kernels read it: contiguous int32, int64 values outside int32
/// becoming -1 (no segment), never wrapping.
at::Tensor kernelIndex(const at::Tensor &idx);

/// One call of an operator level: its arguments and the kernel for them.
struct OperatorCall {
  // Inline storage: no allocation per call (ops take at most 3 floats).
  c10::SmallVector<at::Tensor, 4> floats;
  at::Tensor idx;
  int64_t numSegments = 0;
  const Variant *variant = nullptr;
};

/// Pops the level's arguments off a boxed call's stack and picks their
/// kernel; raises the validator's error unless every tensor matches its
/// buffer and lies on idx's device, of type `deviceType`.
OperatorCall takeArguments(const OperatorLevel &level, torch::jit::Stack *stack,
                           c10::DeviceType deviceType);

/// A kernel's buffers for a call: the pointers in ABI order, the outputs
/// (allocated on idx's device: emptyHostOutput on the host, PyTorch's
/// allocator on CUDA), and what must live until
/// the kernel has run (contiguous copies, the int32 index).
struct BoundBuffers {
  std::vector<uintptr_t> pointers; // reserved once per call
  c10::SmallVector<at::Tensor, 4> outputs;
  c10::SmallVector<at::Tensor, 4> keepAlive;
  at::Tensor kernelIdx;
};
/// `kernelIdx`: the index as the kernel reads it (contiguous int32; see
/// kernelIndex and narrowHostIndex).
BoundBuffers bindBuffers(const OperatorCall &call, at::Tensor kernelIdx);
/// A contiguous int64 host index narrowed as kernelIndex does, in one pass
/// that also checks range (not order): an undefined tensor if a value lies
/// outside [0, numSegments).
at::Tensor narrowHostIndex(const at::Tensor &idx, int64_t numSegments,
                           int numThreads);

/// `idx` (a 1-D int64 host index) narrowed as narrowHostIndex does, or the
/// narrowing remembered for its current content (index_cache.h).
at::Tensor narrowedIndex(const at::Tensor &idx, int64_t numSegments,
                         int numThreads);

/// Runs `call`'s kernel (`run`, on the buffers it is given) on its rows
/// taken in the order of `rows` (the index's sorted rows), into `bound`;
/// row outputs are put back in the caller's row order. Returns what `run`
/// returns (the index check of the sorted run).
using KernelRun = std::function<segrt::IndexCheck(BoundBuffers &)>;
segrt::IndexCheck runOnSortedRows(const OperatorCall &call,
                                  const SortedRows &rows, BoundBuffers &bound,
                                  const KernelRun &run);

/// Runs `call`'s GPU kernels on `module` through segrt's GPU launcher (the
/// long-segment kernels' scratch allocated on idx's device), on `stream`,
/// never synchronizing.
void runGpuCall(const OperatorCall &call, const BoundBuffers &bound,
                segrt::CudaModule &module, uintptr_t stream);

/// The outputs of a CPU call: its host kernel, or, where its variant's GPU
/// modules are simulated (SEGOPS_SIMULATE_GPU=1), its GPU kernels launched
/// by runGpuCall over the simulated CUDA driver, idx checked for range on
/// the host and an unsorted one run on its rows in sorted order, as on the
/// host.
c10::SmallVector<at::Tensor, 4> runCpuCall(const OperatorLevel &level,
                                           const OperatorCall &call);

/// The outputs of a CUDA call (torch_ops_cuda.cpp): its GPU kernels on the
/// current stream of idx's device.
c10::SmallVector<at::Tensor, 4> runCudaCall(const OperatorLevel &level,
                                            const OperatorCall &call);

/// Runs `call`'s host kernel (idx narrowed and checked as it runs; an
/// unsorted index on its rows in sorted order) and returns the outputs;
/// raises the level's error for an index out of range.
c10::SmallVector<at::Tensor, 4> runHostCall(const OperatorLevel &level,
                                            const OperatorCall &call);

/// A kernel's variant from its manifest record: `resolve` gives a host
/// symbol's address (null: no host code). Every float argument is saved for
/// the backward, and the kernels run from the op library's GPU modules,
/// until the caller says otherwise.
using SymbolResolver = std::function<void *(const std::string &symbol)>;
Variant variantOf(const segops_python::KernelRecord &record,
                  const SymbolResolver &resolve);

/// The PTX of a manifest in `directory` that every supported device runs:
/// the oldest architecture's (the driver compiles it for newer ones), or ""
/// if it has none. Throws std::runtime_error if the file cannot be read.
std::string readPortablePtx(const segops_python::ManifestRecord &manifest,
                            const std::string &directory);

/// An operator level of `numFloats` float arguments and `numOutputs`
/// outputs over these variants, whose backward (if any) is operator
/// segops::`backward`, registered already.
/// `overload` and `backwardOverload` name the overloads ("": the default).
std::shared_ptr<OperatorLevel>
makeOperatorLevel(const std::string &name, size_t numFloats, size_t numOutputs,
                  std::map<std::string, Variant> variants,
                  const std::string &backward, const std::string &overload = "",
                  const std::string &backwardOverload = "");

/// Registers the CPU, CUDA (where built), autograd (if it has a backward)
/// and Meta kernels of `level` with the dispatcher.
void registerLevelKernels(std::shared_ptr<OperatorLevel> level,
                          bool withMetaKernel);

/// The library op level named `name` (segops::<name>), or null; all of
/// them (op_library.cpp registers them as the library loads).
std::shared_ptr<OperatorLevel> libraryLevel(const std::string &name);
const std::map<std::string, std::shared_ptr<OperatorLevel>> &libraryLevels();
/// Where a library op level's arguments lie in its schema
/// (`segops::<level>(Tensor arg0, ..., Tensor grad<i>, ..., Tensor idx,
/// SymInt num_segments)`, op_library.cpp): the Python package reads graphs
/// of these ops by it rather than restating the layout.
struct OperatorSignature {
  size_t numArguments = 0;   // the op's own float arguments, from position 0
  size_t numLevelInputs = 0; // then the saved results and cotangents the
                             // levels below add
  size_t idxPosition = 0;
  size_t numSegmentsPosition = 0;
  size_t numOutputs = 0;
  int derivativeOrder = 0;
  std::string backward; // the next level, "" for the last
  /// The outputs the backward takes after this level's float arguments
  /// (OperatorLevel::savedResults).
  std::vector<size_t> savedResults;
};
OperatorSignature signatureOf(const OperatorLevel &level);

/// Adds `variant` to the library op level and key its kernel's name
/// (segmented_sum_f32_w64_grad) gives; false if the name is not a library
/// kernel's.
bool provideLibraryVariant(const std::string &kernelName, Variant variant);
/// Why the library defined no operators as it loaded; "" where it did.
const std::string &libraryLoadError();

/// Makes an autograd node the way this PyTorch's autograd holds nodes
/// (intrusive or shared pointers, depending on the release).
template <typename NodeType, typename... Args> auto makeNode(Args &&...args) {
  using NodePointer = decltype(torch::autograd::Edge().function);
  if constexpr (std::is_same_v<NodePointer,
                               std::shared_ptr<torch::autograd::Node>>)
    return NodePointer(std::make_shared<NodeType>(std::forward<Args>(args)...));
  else
    return NodePointer(
        c10::make_intrusive<NodeType>(std::forward<Args>(args)...));
}

/// `node` as the pointer autograd holds it by (what unpacking a saved
/// output takes).
template <typename NodeType> auto nodePointer(NodeType *node) {
  using NodePointer = decltype(torch::autograd::Edge().function);
  if constexpr (std::is_same_v<NodePointer,
                               std::shared_ptr<torch::autograd::Node>>)
    return NodePointer(node->shared_from_this());
  else
    return NodePointer(node->getptr());
}

/// An uninitialized CPU tensor for a kernel's output; large ones reuse
/// buffers of earlier outputs (host_outputs.cpp).
at::Tensor emptyHostOutput(at::IntArrayRef shape, at::ScalarType dtype);

/// `tensor` if it is contiguous and starts at a multiple of the kernels'
/// buffer alignment (segrt::abi::kBufferAlignment), else a contiguous copy:
/// on the host into an emptyHostOutput buffer (an expanded gradient, such
/// as the one `out.sum().backward()` passes, would otherwise cost a fresh
/// allocation's page faults on every call), elsewhere PyTorch's.
at::Tensor contiguousInput(const at::Tensor &tensor);

/// Makes segrt's host workers run on PyTorch's intra-op thread pool
/// (intra_op_workers.cpp).
void runWorkersOnIntraOpPool();

/// The CUDA kernels (torch_ops_cuda.cpp): whether they were built (against
/// a PyTorch with CUDA), and registering one level's.
bool cudaKernelsBuilt();
void registerCudaKernel(std::shared_ptr<const OperatorLevel> level,
                        std::vector<std::unique_ptr<torch::Library>> &keep);
/// Whether idx's content is checked on CUDA too (SEGOPS_DEBUG).
void setDebugChecks(bool enabled);
bool debugChecks();

} // namespace segops_torch

#endif // SEGOPS_PYTHON_TORCH_OPS_H
