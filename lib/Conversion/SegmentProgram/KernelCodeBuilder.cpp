//===- KernelCodeBuilder.cpp - scalar helpers for kernel code -------------===//

#include "segops/Conversion/KernelCodeBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

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

Value KernelCodeBuilder::narrowRange(Value lo, Value hi, NarrowStep step) {
  Type i64Type = builder.getI64Type();
  auto search = builder.create<scf::WhileOp>(
      loc, TypeRange{i64Type, i64Type}, ValueRange{lo, hi},
      [&](OpBuilder &b, Location l, ValueRange bounds) {
        Value open = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt,
                                             bounds[0], bounds[1]);
        b.create<scf::ConditionOp>(l, open, bounds);
      },
      [&](OpBuilder &b, Location l, ValueRange bounds) {
        auto [newLo, newHi] = step(b, l, bounds[0], bounds[1]);
        b.create<scf::YieldOp>(l, ValueRange{newLo, newHi});
      });
  return search.getResult(0);
}

Value KernelCodeBuilder::lowerBound(Value idx, Value lo, Value hi,
                                    Value segment) {
  return narrowRange(
      lo, hi,
      [&](OpBuilder &b, Location l, Value low,
          Value high) -> std::pair<Value, Value> {
        KernelCodeBuilder code(b, l);
        Value sum = b.create<arith::AddIOp>(l, low, high);
        Value mid = b.create<arith::ShRUIOp>(l, sum, code.i64(1));
        Value below = b.create<arith::CmpIOp>(
            l, arith::CmpIPredicate::slt, code.loadSegment(idx, mid), segment);
        Value midPlusOne = b.create<arith::AddIOp>(l, mid, code.i64(1));
        return {b.create<arith::SelectOp>(l, below, midPlusOne, low),
                b.create<arith::SelectOp>(l, below, high, mid)};
      });
}

SmallVector<Value> KernelCodeBuilder::selectByRunningPass(
    Value runningPass, unsigned pass, ValueRange init, PassValues earlier,
    PassValues current) {
  Value passValue = i64(pass);
  auto ifEarlier = builder.create<scf::IfOp>(
      loc,
      builder.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ugt, runningPass,
                                    passValue),
      [&](OpBuilder &b, Location l) {
        b.create<scf::YieldOp>(l, earlier(b, l));
      },
      [&](OpBuilder &b, Location l) {
        auto ifCurrent = b.create<scf::IfOp>(
            l,
            b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, runningPass,
                                    passValue),
            [&](OpBuilder &cb, Location cl) {
              cb.create<scf::YieldOp>(cl, current(cb, cl));
            },
            [&](OpBuilder &lb, Location ll) {
              lb.create<scf::YieldOp>(ll, init);
            });
        b.create<scf::YieldOp>(l, ifCurrent.getResults());
      });
  return SmallVector<Value>(ifEarlier.getResults());
}

Value KernelCodeBuilder::zero(Type type) {
  return builder.create<arith::ConstantOp>(
      loc, cast<TypedAttr>(builder.getZeroAttr(type)));
}

/// The alignment of a vector access of `lanes` `elementType`s.
static unsigned vectorAlignment(Type elementType, int64_t lanes,
                                bool alignedToVector) {
  unsigned bytes = elementType.getIntOrFloatBitWidth() / 8;
  return alignedToVector ? bytes * lanes : bytes;
}

Value KernelCodeBuilder::loadVector(Value base, Type elementType, Value index,
                                    int64_t lanes, bool alignedToVector) {
  auto ptrType = LLVM::LLVMPointerType::get(builder.getContext());
  Value address = builder.create<LLVM::GEPOp>(loc, ptrType, elementType, base,
                                              ValueRange{index},
                                              /*inbounds=*/true);
  auto vectorType = VectorType::get({lanes}, elementType);
  return builder.create<LLVM::LoadOp>(
      loc, vectorType, address,
      vectorAlignment(elementType, lanes, alignedToVector));
}

void KernelCodeBuilder::storeVector(Value vector, Value base, Value index,
                                    bool alignedToVector) {
  auto vectorType = cast<VectorType>(vector.getType());
  Type elementType = vectorType.getElementType();
  auto ptrType = LLVM::LLVMPointerType::get(builder.getContext());
  Value address = builder.create<LLVM::GEPOp>(loc, ptrType, elementType, base,
                                              ValueRange{index},
                                              /*inbounds=*/true);
  builder.create<LLVM::StoreOp>(
      loc, vector, address,
      vectorAlignment(elementType, vectorType.getNumElements(),
                      alignedToVector));
}

void KernelCodeBuilder::storeVectorMasked(Value vector, Value base,
                                          Value index, Value mask) {
  Type elementType = cast<VectorType>(vector.getType()).getElementType();
  auto ptrType = LLVM::LLVMPointerType::get(builder.getContext());
  Value address = builder.create<LLVM::GEPOp>(loc, ptrType, elementType, base,
                                              ValueRange{index},
                                              /*inbounds=*/true);
  builder.create<LLVM::MaskedStoreOp>(
      loc, vector, address, mask,
      static_cast<uint32_t>(elementType.getIntOrFloatBitWidth() / 8));
}

Value KernelCodeBuilder::splat(Value scalar, int64_t lanes) {
  auto vectorType = VectorType::get({lanes}, scalar.getType());
  Value poison = builder.create<LLVM::PoisonOp>(loc, vectorType);
  Value first = builder.create<LLVM::InsertElementOp>(
      loc, poison, scalar, builder.create<arith::ConstantIntOp>(loc, 0, 32));
  return shuffle(first, first, SmallVector<int32_t>(lanes, 0));
}

Value KernelCodeBuilder::shuffle(Value first, Value second,
                                 ArrayRef<int32_t> mask) {
  return builder.create<LLVM::ShuffleVectorOp>(loc, first, second, mask);
}

Value KernelCodeBuilder::horizontalReduce(Value vector,
                                          arith::AtomicRMWKind kind) {
  int64_t lanes = cast<VectorType>(vector.getType()).getNumElements();
  assert(llvm::isPowerOf2_64(lanes) && "lanes must be a power of two");
  for (; lanes > 1; lanes /= 2) {
    SmallVector<int32_t> low, high;
    for (int32_t i = 0; i < lanes / 2; ++i) {
      low.push_back(i);
      high.push_back(lanes / 2 + i);
    }
    vector = arith::getReductionOp(kind, builder, loc,
                                   shuffle(vector, vector, low),
                                   shuffle(vector, vector, high));
  }
  return builder.create<LLVM::ExtractElementOp>(
      loc, vector, builder.create<arith::ConstantIntOp>(loc, 0, 32));
}

std::pair<Value, Value> KernelCodeBuilder::scanSegment(Value idx, Value lo,
                                                       Value hi, Value segment,
                                                       BlockHook onBlock) {
  constexpr int64_t block = kCountingBlock;
  Type i64Type = builder.getI64Type();
  Type i32Type = builder.getI32Type();
  Type i1Type = builder.getI1Type();
  Type bitsType = builder.getIntegerType(block);
  // idx holds i32, and so do the segment and the next one (a precondition):
  // compare in i32.
  Value next = builder.create<arith::AddIOp>(loc, segment, i64(1));
  auto splatI32 = [&](Value bound) {
    return splat(builder.create<arith::TruncIOp>(loc, i32Type, bound), block);
  };
  Value nexts = splatI32(next);
  Value segments = splatI32(segment);
  Value noBits = builder.create<arith::ConstantIntOp>(loc, 0, block);
  Value noProblem = builder.create<arith::ConstantIntOp>(loc, 0, 1);
  auto scan = builder.create<scf::WhileOp>(
      loc, TypeRange{i64Type, i1Type}, ValueRange{lo, noProblem},
      [&](OpBuilder &b, Location l, ValueRange state) {
        KernelCodeBuilder code(b, l);
        Value row = state[0];
        Value blockEnd = b.create<arith::AddIOp>(l, row, code.i64(block));
        Value fits =
            b.create<arith::CmpIOp>(l, arith::CmpIPredicate::sle, blockEnd, hi);
        auto step = b.create<scf::IfOp>(
            l, fits,
            [&](OpBuilder &tb, Location tl) {
              KernelCodeBuilder then(tb, tl);
              if (onBlock)
                onBlock(tb, tl, row);
              Value rows = then.loadVector(idx, i32Type, row, block);
              auto mask = [&](Value bounds) {
                Value below = tb.create<arith::CmpIOp>(
                    tl, arith::CmpIPredicate::slt, rows, bounds);
                return tb.create<LLVM::BitcastOp>(tl, bitsType, below)
                    .getResult();
              };
              Value belowNext = mask(nexts);
              Value belowSegment = mask(segments);
              // Sorted rows of the segment and after: none below the
              // segment, and those below the next one a prefix (bits
              // 0..k-1, so that adding 1 carries through them all).
              Value notPrefix = tb.create<arith::CmpIOp>(
                  tl, arith::CmpIPredicate::ne,
                  tb.create<arith::AndIOp>(
                      tl, belowNext,
                      tb.create<arith::AddIOp>(
                          tl, belowNext,
                          tb.create<arith::ConstantIntOp>(tl, 1, block))),
                  noBits);
              Value anyBelow = tb.create<arith::CmpIOp>(
                  tl, arith::CmpIPredicate::ne, belowSegment, noBits);
              Value problem = tb.create<arith::OrIOp>(
                  tl, state[1],
                  tb.create<arith::OrIOp>(tl, notPrefix, anyBelow));
              Value count = tb.create<arith::ExtUIOp>(
                  tl, i64Type, tb.create<LLVM::CtPopOp>(tl, belowNext));
              Value whole = tb.create<arith::CmpIOp>(
                  tl, arith::CmpIPredicate::eq, count, then.i64(block));
              tb.create<scf::YieldOp>(
                  tl,
                  ValueRange{whole, tb.create<arith::AddIOp>(tl, row, count),
                             problem});
            },
            [&](OpBuilder &eb, Location el) {
              // Fewer than a block of rows left: one at a time.
              auto tail = eb.create<scf::WhileOp>(
                  el, TypeRange{i64Type, i1Type}, ValueRange{row, state[1]},
                  [&](OpBuilder &cb, Location cl, ValueRange at) {
                    Value inRange = cb.create<arith::CmpIOp>(
                        cl, arith::CmpIPredicate::slt, at[0], hi);
                    auto below = cb.create<scf::IfOp>(
                        cl, inRange,
                        [&](OpBuilder &ib, Location il) {
                          Value value =
                              KernelCodeBuilder(ib, il).loadSegment(idx, at[0]);
                          ib.create<scf::YieldOp>(
                              il,
                              ValueRange{ib.create<arith::CmpIOp>(
                                  il, arith::CmpIPredicate::slt, value, next)});
                        },
                        [&](OpBuilder &ib, Location il) {
                          ib.create<scf::YieldOp>(
                              il, ValueRange{ib.create<arith::ConstantIntOp>(
                                      il, 0, 1)});
                        });
                    cb.create<scf::ConditionOp>(cl, below.getResult(0), at);
                  },
                  [&](OpBuilder &cb, Location cl, ValueRange at) {
                    KernelCodeBuilder code(cb, cl);
                    Value value = code.loadSegment(idx, at[0]);
                    Value belowSegment = cb.create<arith::CmpIOp>(
                        cl, arith::CmpIPredicate::slt, value, segment);
                    cb.create<scf::YieldOp>(
                        cl,
                        ValueRange{
                            cb.create<arith::AddIOp>(cl, at[0], code.i64(1)),
                            cb.create<arith::OrIOp>(cl, at[1], belowSegment)});
                  });
              eb.create<scf::YieldOp>(
                  el, ValueRange{eb.create<arith::ConstantIntOp>(el, 0, 1),
                                 tail.getResult(0), tail.getResult(1)});
            });
        b.create<scf::ConditionOp>(
            l, step.getResult(0),
            ValueRange{step.getResult(1), step.getResult(2)});
      },
      [&](OpBuilder &b, Location l, ValueRange state) {
        b.create<scf::YieldOp>(l, state);
      });
  return {scan.getResult(0), scan.getResult(1)};
}

Value KernelCodeBuilder::anyRowOutside(Value idx, Value lo, Value hi,
                                       Value segment) {
  constexpr int64_t block = kCountingBlock;
  Type i32Type = builder.getI32Type();
  Type i1Type = builder.getI1Type();
  Value segments =
      splat(builder.create<arith::TruncIOp>(loc, i32Type, segment), block);
  Value count = builder.create<arith::SubIOp>(loc, hi, lo);
  Value blocksEnd = builder.create<arith::AddIOp>(
      loc, lo,
      builder.create<arith::MulIOp>(
          loc, builder.create<arith::DivUIOp>(loc, count, i64(block)),
          i64(block)));
  Value none = zero(VectorType::get({block}, i1Type));
  auto blocks = builder.create<scf::ForOp>(
      loc, lo, blocksEnd, i64(block), ValueRange{none},
      [&](OpBuilder &b, Location l, Value row, ValueRange seen) {
        Value rows =
            KernelCodeBuilder(b, l).loadVector(idx, i32Type, row, block);
        Value other = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, rows,
                                              segments);
        b.create<scf::YieldOp>(
            l, ValueRange{b.create<arith::OrIOp>(l, seen[0], other)});
      });
  Value blockBits = builder.create<LLVM::BitcastOp>(
      loc, builder.getIntegerType(block), blocks.getResult(0));
  Value inBlocks = builder.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::ne, blockBits,
      builder.create<arith::ConstantIntOp>(loc, 0, block));
  auto rest = builder.create<scf::ForOp>(
      loc, blocksEnd, hi, i64(1), ValueRange{inBlocks},
      [&](OpBuilder &b, Location l, Value row, ValueRange seen) {
        Value value = KernelCodeBuilder(b, l).loadSegment(idx, row);
        Value other = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne,
                                              value, segment);
        b.create<scf::YieldOp>(
            l, ValueRange{b.create<arith::OrIOp>(l, seen[0], other)});
      });
  return rest.getResult(0);
}

Value KernelCodeBuilder::logicalNot(Value value) {
  Value ones = builder.create<arith::ConstantOp>(
      loc, cast<TypedAttr>(builder.getOneAttr(value.getType())));
  return builder.create<arith::XOrIOp>(loc, value, ones);
}
