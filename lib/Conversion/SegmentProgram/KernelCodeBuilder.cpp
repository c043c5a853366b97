//===- KernelCodeBuilder.cpp - scalar helpers for kernel code -------------===//

#include "segops/Conversion/KernelCodeBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::seg;

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
  Value address = builder.create<LLVM::GEPOp>(loc, ptrType, value.getType(),
                                              base, ValueRange{index},
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
        Value newLo =
            b.create<arith::SelectOp>(l, below, midPlusOne, bounds[0]);
        Value newHi = b.create<arith::SelectOp>(l, below, bounds[1], mid);
        b.create<scf::YieldOp>(l, ValueRange{newLo, newHi});
      });
  return search.getResult(0);
}

Value KernelCodeBuilder::zero(Type type) {
  return builder.create<arith::ConstantOp>(loc,
                                           builder.getFloatAttr(type, 0.0));
}

Value KernelCodeBuilder::scanningLowerBound(Value idx, Value lo, Value hi,
                                            Value segment, int64_t block) {
  // Skip whole blocks while a block's last row is below `segment` (in a
  // sorted index, so is every row of the block); then search the block
  // holding the answer.
  Type i64Type = builder.getI64Type();
  auto scan = builder.create<scf::WhileOp>(
      loc, TypeRange{i64Type}, ValueRange{lo},
      [&](OpBuilder &b, Location l, ValueRange state) {
        KernelCodeBuilder code(b, l);
        Value last = b.create<arith::AddIOp>(l, state[0], code.i64(block - 1));
        Value inRange =
            b.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, last, hi);
        auto below = b.create<scf::IfOp>(
            l, inRange,
            [&](OpBuilder &tb, Location tl) {
              KernelCodeBuilder then(tb, tl);
              Value value = then.loadSegment(idx, last);
              tb.create<scf::YieldOp>(
                  tl, ValueRange{tb.create<arith::CmpIOp>(
                          tl, arith::CmpIPredicate::slt, value, segment)});
            },
            [&](OpBuilder &eb, Location el) {
              eb.create<scf::YieldOp>(
                  el, ValueRange{eb.create<arith::ConstantIntOp>(el, 0, 1)});
            });
        b.create<scf::ConditionOp>(l, below.getResult(0), state);
      },
      [&](OpBuilder &b, Location l, ValueRange state) {
        KernelCodeBuilder code(b, l);
        b.create<scf::YieldOp>(l, ValueRange{b.create<arith::AddIOp>(
                                      l, state[0], code.i64(block))});
      });
  Value start = scan.getResult(0);
  Value upper = builder.create<arith::MinSIOp>(
      loc, builder.create<arith::AddIOp>(loc, start, i64(block)), hi);
  return lowerBound(idx, start, upper, segment);
}
