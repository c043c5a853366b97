//===- SegKernelABI.cpp - kernel functions and their ABI ------------------===//

#include "segops/Conversion/SegKernelABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "segops/Dialect/Seg/IR/SegOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::seg;

//===----------------------------------------------------------------------===//
// Analysis of kernel functions.
//===----------------------------------------------------------------------===//

static SmallVector<std::string, 3> symbolicShape(Value value,
                                                 StringRef leading) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<std::string, 3> shape{leading.str()};
  for (int64_t dim : type.getShape().drop_front())
    shape.push_back(std::to_string(dim));
  return shape;
}

static int64_t rowWidth(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getRank() == 1 ? 1 : type.getDimSize(1);
}

bool mlir::seg::isKernelFunctionCandidate(func::FuncOp func) {
  if (func.isExternal())
    return false;
  bool hasSegOp = false;
  func.walk([&](Operation *op) {
    if (isa<SegDialect>(op->getDialect()))
      hasSegOp = true;
  });
  return hasSegOp;
}

unsigned KernelInterface::getBufferIndex(Value value) const {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    unsigned position = 0;
    for (BlockArgument other : func.getArguments()) {
      if (other == arg)
        return position;
      if (isa<RankedTensorType>(other.getType()))
        ++position;
    }
  }
  // The op's result is the only output buffer.
  return buffers.size() - 1;
}

FailureOr<KernelInterface> mlir::seg::analyzeKernelFunction(func::FuncOp func) {
  auto fail = [&](const Twine &why) {
    return func.emitError() << "'" << func.getSymName()
                            << "' is not a seg kernel function: " << why;
  };
  Block &body = func.getBody().front();
  if (body.getOperations().size() != 2)
    return fail("its body must be one seg operation and a return");
  Operation *op = &body.front();
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!isa<SegDialect>(op->getDialect()) || !ret ||
      ret.getNumOperands() != 1 || ret.getOperand(0) != op->getResult(0))
    return fail("its body must be one seg operation whose result is "
                "returned");
  // With nothing else in the body, every operand is a function argument.
  for (BlockArgument arg : func.getArguments())
    if (!isa<RankedTensorType, IndexType>(arg.getType()))
      return fail("arguments must be ranked tensors or index");

  KernelInterface interface;
  interface.func = func;
  interface.op = op;
  auto addBuffer = [&](Value value, StringRef name, StringRef leading,
                       bool isOutput) {
    interface.buffers.push_back(
        {name.str(), isOutput,
         cast<RankedTensorType>(value.getType()).getElementType(),
         symbolicShape(value, leading)});
  };

  // Tensor arguments become input buffers in argument order; name and shape
  // them from the role they play in the op.
  DenseMap<Value, std::pair<StringRef, StringRef>> roles;
  LogicalResult supported =
      TypeSwitch<Operation *, LogicalResult>(op)
          .Case<SumOp>([&](SumOp sum) {
            interface.strategy = KernelStrategy::SegmentReduction;
            interface.width = rowWidth(sum.getX());
            roles[sum.getX()] = {"x", "N"};
            roles[sum.getIdx()] = {"idx", "N"};
            return success();
          })
          .Case<GatherOp>([&](GatherOp gather) {
            interface.strategy = KernelStrategy::RowMap;
            interface.width = rowWidth(gather.getY());
            roles[gather.getY()] = {"y", "S"};
            roles[gather.getIdx()] = {"idx", "N"};
            return success();
          })
          .Default([&](Operation *) { return failure(); });
  if (failed(supported))
    return fail("'" + op->getName().getStringRef() +
                "' has no kernel lowering yet");

  for (BlockArgument arg : func.getArguments()) {
    if (!isa<RankedTensorType>(arg.getType()))
      continue;
    auto role = roles.find(arg);
    if (role == roles.end())
      return fail("tensor argument #" + Twine(arg.getArgNumber()) +
                  " is not used by the operation");
    // An argument used twice (e.g. sum(x, x)) would alias two roles.
    roles.erase(role->first);
    addBuffer(arg, role->second.first, role->second.second, false);
  }
  if (!roles.empty())
    return fail("each tensor argument must fill exactly one operand");

  Value result = op->getResult(0);
  StringRef leading =
      interface.strategy == KernelStrategy::SegmentReduction ? "S" : "N";
  addBuffer(result, "out", leading, /*isOutput=*/true);
  interface.elementType =
      cast<RankedTensorType>(result.getType()).getElementType();
  return interface;
}

//===----------------------------------------------------------------------===//
// KernelCodeBuilder
//===----------------------------------------------------------------------===//

Value KernelCodeBuilder::i64(int64_t value) {
  return builder.create<arith::ConstantIntOp>(loc, value, 64);
}

Value KernelCodeBuilder::load(Value base, Type elementType, Value index) {
  auto ptrType = LLVM::LLVMPointerType::get(builder.getContext());
  Value address = builder.create<LLVM::GEPOp>(loc, ptrType, elementType, base,
                                              ValueRange{index},
                                              /*inbounds=*/true);
  return builder.create<LLVM::LoadOp>(loc, elementType, address);
}

void KernelCodeBuilder::store(Value value, Value base, Value index) {
  auto ptrType = LLVM::LLVMPointerType::get(builder.getContext());
  Value address = builder.create<LLVM::GEPOp>(
      loc, ptrType, value.getType(), base, ValueRange{index},
      /*inbounds=*/true);
  builder.create<LLVM::StoreOp>(loc, value, address);
}

Value KernelCodeBuilder::loadSegment(Value idx, Value row) {
  Value segment = load(idx, builder.getI32Type(), row);
  return builder.create<arith::ExtSIOp>(loc, builder.getI64Type(), segment);
}

Value KernelCodeBuilder::isValidSegment(Value segment, Value numSegments) {
  Value zero = i64(0);
  Value notNegative = builder.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::sge, segment, zero);
  Value belowCount = builder.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::slt, segment, numSegments);
  return builder.create<arith::AndIOp>(loc, notNegative, belowCount);
}

Value KernelCodeBuilder::lowerBound(Value idx, Value lo, Value hi,
                                    Value segment) {
  Type i64Type = builder.getI64Type();
  auto search = builder.create<scf::WhileOp>(
      loc, TypeRange{i64Type, i64Type}, ValueRange{lo, hi},
      [&](OpBuilder &b, Location l, ValueRange bounds) {
        Value open = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt,
                                             bounds[0], bounds[1]);
        b.create<scf::ConditionOp>(l, open, bounds);
      },
      [&](OpBuilder &b, Location l, ValueRange bounds) {
        KernelCodeBuilder code(b, l);
        Value sum = b.create<arith::AddIOp>(l, bounds[0], bounds[1]);
        Value mid = b.create<arith::ShRUIOp>(l, sum, code.i64(1));
        Value below = b.create<arith::CmpIOp>(
            l, arith::CmpIPredicate::slt, code.loadSegment(idx, mid), segment);
        Value midPlusOne = b.create<arith::AddIOp>(l, mid, code.i64(1));
        Value newLo = b.create<arith::SelectOp>(l, below, midPlusOne, bounds[0]);
        Value newHi = b.create<arith::SelectOp>(l, below, bounds[1], mid);
        b.create<scf::YieldOp>(l, ValueRange{newLo, newHi});
      });
  return search.getResult(0);
}

Value KernelCodeBuilder::zero(Type type) {
  return builder.create<arith::ConstantOp>(loc, builder.getFloatAttr(type, 0.0));
}

Value KernelCodeBuilder::loadOrZero(Value condition, Value base,
                                    Type elementType, Value index) {
  auto ifOp = builder.create<scf::IfOp>(
      loc, condition,
      [&](OpBuilder &b, Location l) {
        KernelCodeBuilder code(b, l);
        b.create<scf::YieldOp>(l, code.load(base, elementType, index));
      },
      [&](OpBuilder &b, Location l) {
        KernelCodeBuilder code(b, l);
        b.create<scf::YieldOp>(l, code.zero(elementType));
      });
  return ifOp.getResult(0);
}
