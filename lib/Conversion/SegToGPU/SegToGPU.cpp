//===- SegToGPU.cpp - seg kernel functions to gpu.func kernels ------------===//

#include "segops/Conversion/Passes.h"
#include "segops/Conversion/SegKernelABI.h"
#include "segops/Dialect/Seg/IR/SegOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/MathExtras.h"

namespace mlir {
namespace seg {
#define GEN_PASS_DEF_CONVERTSEGTOGPU
#include "segops/Conversion/Passes.h.inc"
} // namespace seg
} // namespace mlir

using namespace mlir;
using namespace mlir::seg;

static constexpr StringLiteral kKernelModuleName = "seg_kernels";

namespace {
/// Emits the body of one gpu.func kernel for a kernel function.
class GPUKernelEmitter {
public:
  GPUKernelEmitter(const KernelInterface &interface, gpu::GPUFuncOp kernel,
                   int64_t blockSize)
      : interface(interface), kernel(kernel), blockSize(blockSize),
        builder(kernel.getContext()),
        code(builder, interface.func.getLoc()) {
    builder.setInsertionPointToStart(&kernel.getBody().front());
  }

  void emit() {
    Location loc = code.loc;
    threadId = indexToI64(builder.create<gpu::ThreadIdOp>(loc,
                                                          gpu::Dimension::x));
    blockId = indexToI64(builder.create<gpu::BlockIdOp>(loc,
                                                        gpu::Dimension::x));
    gridDim = indexToI64(builder.create<gpu::GridDimOp>(loc,
                                                        gpu::Dimension::x));
    unsigned numBuffers = interface.getNumBuffers();
    numRows = kernel.getArgument(numBuffers);
    numSegments = kernel.getArgument(numBuffers + 1);
    if (interface.strategy == KernelStrategy::SegmentReduction)
      emitSegmentReduction();
    else
      emitRowMap();
    builder.create<gpu::ReturnOp>(loc);
  }

private:
  Value indexToI64(Value value) {
    return builder.create<arith::IndexCastOp>(code.loc, builder.getI64Type(),
                                              value);
  }
  Value buffer(Value operand) {
    return kernel.getArgument(interface.getBufferIndex(operand));
  }
  Value outputBuffer() {
    return kernel.getArgument(interface.getNumBuffers() - 1);
  }

  /// Contribution of flat element `flat` (row flat / width, component
  /// flat % width) to its segment's reduction.
  Value emitContribution(OpBuilder &b, Location loc, Value flat) {
    auto sum = cast<SumOp>(interface.op);
    KernelCodeBuilder local(b, loc);
    return local.load(buffer(sum.getX()), interface.elementType, flat);
  }

  // One block per segment, grid-striding over segments. The block strides
  // over the segment's rows as flat scalars; because the block size is a
  // multiple of 3, a thread always sees the same vec3 component, and a tree
  // over strides that are multiples of 3 leaves per-component totals in
  // shared[0..2].
  void emitSegmentReduction() {
    Location loc = code.loc;
    MLIRContext *ctx = builder.getContext();
    Type elementType = interface.elementType;
    int64_t width = interface.width;
    Value shared = kernel.getWorkgroupAttributions().front();
    Value threadIndex = builder.create<arith::IndexCastOp>(
        loc, builder.getIndexType(), threadId);
    Value idx = kernel.getArgument(
        interface.getBufferIndex(interface.op->getOperand(1)));
    (void)ctx;

    builder.create<scf::ForOp>(
        loc, blockId, numSegments, gridDim, ValueRange{},
        [&](OpBuilder &b, Location l, Value segment, ValueRange) {
          KernelCodeBuilder local(b, l);
          Value begin = local.lowerBound(idx, local.i64(0), numRows, segment);
          Value next = b.create<arith::AddIOp>(l, segment, local.i64(1));
          Value end = local.lowerBound(idx, begin, numRows, next);
          Value flatBegin = b.create<arith::AddIOp>(
              l, b.create<arith::MulIOp>(l, begin, local.i64(width)),
              threadId);
          Value flatEnd = b.create<arith::MulIOp>(l, end, local.i64(width));
          auto partial = b.create<scf::ForOp>(
              l, flatBegin, flatEnd, local.i64(blockSize),
              ValueRange{local.zero(elementType)},
              [&](OpBuilder &ib, Location il, Value flat, ValueRange acc) {
                Value term = emitContribution(ib, il, flat);
                Value sum = ib.create<arith::AddFOp>(il, acc[0], term);
                ib.create<scf::YieldOp>(il, sum);
              });
          b.create<memref::StoreOp>(l, partial.getResult(0), shared,
                                    threadIndex);
          b.create<gpu::BarrierOp>(l);
          for (int64_t stride = blockSize / 2; stride >= 3; stride /= 2) {
            Value active = b.create<arith::CmpIOp>(
                l, arith::CmpIPredicate::slt, threadId, local.i64(stride));
            auto ifOp = b.create<scf::IfOp>(l, active, /*withElse=*/false);
            OpBuilder tb = ifOp.getThenBodyBuilder();
            Value other = tb.create<arith::AddIOp>(
                l, threadIndex, tb.create<arith::ConstantIndexOp>(l, stride));
            Value mine = tb.create<memref::LoadOp>(l, shared, threadIndex);
            Value theirs = tb.create<memref::LoadOp>(l, shared, other);
            Value sum = tb.create<arith::AddFOp>(l, mine, theirs);
            tb.create<memref::StoreOp>(l, sum, shared, threadIndex);
            b.create<gpu::BarrierOp>(l);
          }
          emitSegmentResult(b, l, segment, shared, threadIndex);
          // The next segment reuses shared memory.
          b.create<gpu::BarrierOp>(l);
          b.create<scf::YieldOp>(l);
        });
  }

  void emitSegmentResult(OpBuilder &b, Location l, Value segment,
                         Value shared, Value threadIndex) {
    KernelCodeBuilder local(b, l);
    int64_t width = interface.width;
    if (width == 3) {
      Value writer = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt,
                                             threadId, local.i64(3));
      auto ifOp = b.create<scf::IfOp>(l, writer, /*withElse=*/false);
      OpBuilder tb = ifOp.getThenBodyBuilder();
      KernelCodeBuilder then(tb, l);
      Value total = tb.create<memref::LoadOp>(l, shared, threadIndex);
      Value position = tb.create<arith::AddIOp>(
          l, tb.create<arith::MulIOp>(l, segment, then.i64(3)), threadId);
      then.store(total, outputBuffer(), position);
      return;
    }
    Value writer = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq,
                                           threadId, local.i64(0));
    auto ifOp = b.create<scf::IfOp>(l, writer, /*withElse=*/false);
    OpBuilder tb = ifOp.getThenBodyBuilder();
    KernelCodeBuilder then(tb, l);
    Value total;
    for (int64_t lane = 0; lane < 3; ++lane) {
      Value part = tb.create<memref::LoadOp>(
          l, shared, ValueRange{tb.create<arith::ConstantIndexOp>(l, lane)});
      total = total ? tb.create<arith::AddFOp>(l, total, part) : part;
    }
    then.store(total, outputBuffer(), segment);
  }

  // One thread per output element, grid-striding over the W * N elements.
  void emitRowMap() {
    Location loc = code.loc;
    auto gather = cast<GatherOp>(interface.op);
    int64_t width = interface.width;
    Value first = builder.create<arith::AddIOp>(
        loc, builder.create<arith::MulIOp>(loc, blockId, code.i64(blockSize)),
        threadId);
    Value stride =
        builder.create<arith::MulIOp>(loc, gridDim, code.i64(blockSize));
    Value total = builder.create<arith::MulIOp>(loc, numRows, code.i64(width));
    builder.create<scf::ForOp>(
        loc, first, total, stride, ValueRange{},
        [&](OpBuilder &b, Location l, Value flat, ValueRange) {
          KernelCodeBuilder local(b, l);
          Value row = b.create<arith::DivUIOp>(l, flat, local.i64(width));
          Value component = b.create<arith::RemUIOp>(l, flat, local.i64(width));
          Value segment = local.loadSegment(buffer(gather.getIdx()), row);
          Value valid = local.isValidSegment(segment, numSegments);
          Value source = b.create<arith::AddIOp>(
              l, b.create<arith::MulIOp>(l, segment, local.i64(width)),
              component);
          Value value = local.loadOrZero(valid, buffer(gather.getY()),
                                         interface.elementType, source);
          local.store(value, outputBuffer(), flat);
          b.create<scf::YieldOp>(l);
        });
  }

  const KernelInterface &interface;
  gpu::GPUFuncOp kernel;
  int64_t blockSize;
  OpBuilder builder;
  KernelCodeBuilder code;
  Value threadId, blockId, gridDim, numRows, numSegments;
};

struct ConvertSegToGPUPass
    : public seg::impl::ConvertSegToGPUBase<ConvertSegToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (blockSize < 6 || blockSize > 1536 || blockSize % 3 != 0 ||
        !llvm::isPowerOf2_64(blockSize / 3)) {
      module.emitError() << "block-size must be 3 * 2^k between 6 and 1536, "
                            "but got "
                         << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }

    SmallVector<func::FuncOp> candidates;
    for (auto func : module.getOps<func::FuncOp>())
      if (isKernelFunctionCandidate(func))
        candidates.push_back(func);
    if (candidates.empty())
      return;

    OpBuilder builder(ctx);
    builder.setInsertionPointToEnd(module.getBody());
    auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
    if (!gpuModule)
      gpuModule = builder.create<gpu::GPUModuleOp>(module.getLoc(),
                                                   kKernelModuleName);
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    builder.getUnitAttr());
    SymbolTable kernels(gpuModule);

    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    for (func::FuncOp func : candidates) {
      FailureOr<KernelInterface> interface = analyzeKernelFunction(func);
      if (failed(interface))
        return signalPassFailure();
      SmallVector<Type> params(interface->getNumBuffers(), ptrType);
      params.append(2, builder.getI64Type());
      SmallVector<Type> workgroup;
      if (interface->strategy == KernelStrategy::SegmentReduction)
        workgroup.push_back(MemRefType::get(
            {blockSize}, interface->elementType, MemRefLayoutAttrInterface{},
            gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup)));
      OpBuilder detached(ctx);
      auto kernel = detached.create<gpu::GPUFuncOp>(
          func.getLoc(), func.getSymName(),
          builder.getFunctionType(params, {}), workgroup);
      kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                      builder.getUnitAttr());
      kernel.setKnownBlockSizeAttr(builder.getDenseI32ArrayAttr(
          {static_cast<int32_t>(blockSize), 1, 1}));
      GPUKernelEmitter(*interface, kernel, blockSize).emit();
      func.erase();
      kernels.insert(kernel);
    }
  }
};
} // namespace
