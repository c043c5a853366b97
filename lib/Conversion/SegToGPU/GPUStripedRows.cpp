//===- GPUStripedRows.cpp - rows of odd widths moved a warp at a time ----===//
//
// Row maps of SegmentProgram::gpuStripesRowMap: rows of F components, F odd
// (3-vectors), held a row per lane. Lane l loading its own row reads 3
// sectors for each one it uses (rows 12 or 24 bytes apart); instead the
// warp loads its 32 rows as F loads of 32 consecutive values (load k of
// lane l: value 32k + l) and shuffles hand each lane its row's values, and
// row outputs go back the same way (CUB's warp-striped arrangement, by
// shuffles instead of shared memory). Segment inputs are read once for the
// warp's few consecutive segments, and shuffled to the lanes reading them.
//
// Reductions of such rows as they are (SegmentProgram::
// gpuStripedReductions: sum, mean, max, min) load them the same way in
// their tile pieces, but need no shuffles: each lane reduces the values it
// loads, F accumulators of F different components.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelEmitter.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::seg;

using Components = SegmentProgramEmitter::Components;

/// The inverse of 32 modulo an odd `modulus` above 1.
static int64_t inverseOf32(int64_t modulus) {
  for (int64_t x = 1; x < modulus; ++x)
    if (32 * x % modulus == 1)
      return x;
  llvm_unreachable("32 is invertible modulo an odd number");
}

void GPUKernelEmitter::emitStripedRowMap(OpBuilder &b) {
  // As emitRowMap's: a block takes U x K rows a step, thread u rows u,
  // u + U, ... But the loop is the warp's (the shuffles need every lane):
  // it runs while the warp's first row is below N, its lanes past N masked.
  int64_t rowsPerUnit = program.gpuRowMapRowsPerUnit();
  Value tileRows = i64(b, program.gpuRowMapBlockRows(blockSize));
  Value warpThread = b.create<arith::SubIOp>(loc, threadId, lane);
  Value first = b.create<arith::AddIOp>(
      loc, b.create<arith::MulIOp>(loc, blockId, tileRows), warpThread);
  Value stride = b.create<arith::MulIOp>(loc, gridDim, tileRows);
  b.create<scf::ForOp>(
      loc, first, numRows, stride, ValueRange{},
      [&](OpBuilder &rb, Location rl, Value base, ValueRange) {
        // Every idx load of the step before its first row's loads.
        SmallVector<std::pair<Value, MappedRow>> rows;
        for (int64_t k = 0; k < rowsPerUnit; ++k) {
          Value warpRow =
              rb.create<arith::AddIOp>(rl, base, i64(rb, k * blockSize));
          Value row = rb.create<arith::AddIOp>(rl, warpRow, lane);
          Value inRange = rb.create<arith::CmpIOp>(
              rl, arith::CmpIPredicate::slt, row, numRows);
          rows.push_back(
              {warpRow, MappedRow{row, inRange, segmentOr(rb, inRange, row)}});
        }
        for (auto &[warpRow, mapped] : rows)
          emitStripedRows(rb, warpRow, mapped);
        rb.create<scf::YieldOp>(rl);
      });
}

SmallVector<Value> GPUKernelEmitter::stripeOfComponents(OpBuilder &b,
                                                        int64_t components) {
  // k with 32k + lane = c (mod F): k = (c - lane) / 32 (mod F).
  Type i32Type = b.getI32Type();
  Value laneMod = b.create<arith::RemUIOp>(
      loc, b.create<arith::TruncIOp>(loc, i32Type, lane), i32(b, components));
  Value inverse = i32(b, inverseOf32(components));
  SmallVector<Value> stripes;
  for (int64_t c = 0; c < components; ++c) {
    Value difference =
        b.create<arith::SubIOp>(loc, i32(b, c + components), laneMod);
    stripes.push_back(b.create<arith::RemUIOp>(
        loc, b.create<arith::MulIOp>(loc, difference, inverse),
        i32(b, components)));
  }
  return stripes;
}

/// `value` from lane `source` (an i32) of the warp.
static Value shuffleFrom(OpBuilder &b, Location loc, Value value,
                         Value source) {
  Value width = b.create<arith::ConstantIntOp>(loc, kWarpSize, 32);
  return b
      .create<gpu::ShuffleOp>(loc, value, source, width, gpu::ShuffleMode::IDX)
      .getShuffleResult();
}

/// candidates[i] for the i where `chosen(i)` (an i1) holds, candidates[0]
/// where none of the others' does: a select each.
static Value selectAmong(OpBuilder &b, Location loc, ArrayRef<Value> candidates,
                         function_ref<Value(int64_t)> chosen) {
  Value value = candidates[0];
  for (int64_t i = 1, e = candidates.size(); i < e; ++i)
    value = b.create<arith::SelectOp>(loc, chosen(i), candidates[i], value);
  return value;
}

/// Value 32k + lane from `base` (i64s): load or store k of a stripe.
static Value stripeWord(OpBuilder &b, Location loc, Value base, int64_t k,
                        Value lane) {
  return b.create<arith::AddIOp>(
      loc,
      b.create<arith::AddIOp>(
          loc, base, b.create<arith::ConstantIntOp>(loc, k * kWarpSize, 64)),
      lane);
}

/// Loads `buffer[word]` where `inBounds`, else 0.
static Value loadOrZero(OpBuilder &b, Location loc, Value buffer,
                        Type elementType, Value word, Value inBounds) {
  auto ifLoad = b.create<scf::IfOp>(
      loc, inBounds,
      [&](OpBuilder &tb, Location tl) {
        tb.create<scf::YieldOp>(
            tl, KernelCodeBuilder(tb, tl).load(buffer, elementType, word));
      },
      [&](OpBuilder &eb, Location el) {
        eb.create<scf::YieldOp>(el,
                                KernelCodeBuilder(eb, el).zero(elementType));
      });
  return ifLoad.getResult(0);
}

SmallVector<Value> GPUKernelEmitter::loadStripes(OpBuilder &b, Value buffer,
                                                 Value warpRow,
                                                 int64_t components) {
  Value base = b.create<arith::MulIOp>(loc, warpRow, i64(b, components));
  Value end = b.create<arith::MulIOp>(loc, numRows, i64(b, components));
  SmallVector<Value> stripes;
  for (int64_t k = 0; k < components; ++k) {
    Value word = stripeWord(b, loc, base, k, lane);
    Value inBounds =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, word, end);
    stripes.push_back(
        loadOrZero(b, loc, buffer, program.elementType, word, inBounds));
  }
  return stripes;
}

Components GPUKernelEmitter::rowsFromStripes(OpBuilder &b,
                                             ArrayRef<Value> stripes) {
  // Lane l's component c is value lF + c of the warp's: lane (lF + c) % 32
  // holds it in its load (lF + c) / 32. Each lane sends, for component c,
  // its one load holding a value of component c (stripeOfComponents).
  int64_t components = stripes.size();
  Type i32Type = b.getI32Type();
  SmallVector<Value> stripeOf = stripeOfComponents(b, components);
  Value laneTimesF = b.create<arith::MulIOp>(
      loc, b.create<arith::TruncIOp>(loc, i32Type, lane), i32(b, components));
  Components row;
  for (int64_t c = 0; c < components; ++c) {
    Value sent = selectAmong(b, loc, stripes, [&](int64_t k) -> Value {
      return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, stripeOf[c],
                                     i32(b, k));
    });
    Value source = b.create<arith::AndIOp>(
        loc, b.create<arith::AddIOp>(loc, laneTimesF, i32(b, c)),
        i32(b, kWarpSize - 1));
    row.push_back(shuffleFrom(b, loc, sent, source));
  }
  return row;
}

void GPUKernelEmitter::storeStripedRows(OpBuilder &b, Value buffer,
                                        Value warpRow, ArrayRef<Value> row) {
  // The inverse of rowsFromStripes: store k of lane m writes value 32k + m
  // of the warp's, component c = (32k + m) % F of row (32k + m) / F. For
  // each c every lane sends its row's component c, and lane m takes it
  // from the row whose value of component c it stores.
  int64_t components = row.size();
  Type i32Type = b.getI32Type();
  SmallVector<Value> stripeOf = stripeOfComponents(b, components);
  Value lane32 = b.create<arith::TruncIOp>(loc, i32Type, lane);
  SmallVector<Value> received;
  for (int64_t c = 0; c < components; ++c) {
    Value value = b.create<arith::AddIOp>(
        loc, b.create<arith::MulIOp>(loc, stripeOf[c], i32(b, kWarpSize)),
        lane32);
    received.push_back(
        shuffleFrom(b, loc, row[c],
                    b.create<arith::DivUIOp>(loc, value, i32(b, components))));
  }
  Value base = b.create<arith::MulIOp>(loc, warpRow, i64(b, components));
  Value end = b.create<arith::MulIOp>(loc, numRows, i64(b, components));
  for (int64_t k = 0; k < components; ++k) {
    Value stored = selectAmong(b, loc, received, [&](int64_t c) -> Value {
      return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, stripeOf[c],
                                     i32(b, k));
    });
    Value word = stripeWord(b, loc, base, k, lane);
    auto ifStore = b.create<scf::IfOp>(
        loc, b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, word, end),
        /*withElse=*/false);
    OpBuilder sb = ifStore.getThenBodyBuilder();
    KernelCodeBuilder(sb, loc).store(stored, buffer, word);
  }
}

/// Loads of 32 values that hold `segments` consecutive segments' values
/// of `components` each.
static int64_t segmentLoads(int64_t components) {
  return llvm::divideCeil(SegmentProgram::kGPUStripedSegments * components,
                          kWarpSize);
}

Components GPUKernelEmitter::loadWarpSegments(OpBuilder &b, Value buffer,
                                              int64_t components,
                                              const MappedRow &mapped,
                                              Value needs, Value together,
                                              Value firstSegment,
                                              ArrayRef<Value> laterLoads) {
  Type elementType = program.elementType;
  auto ifTogether = b.create<scf::IfOp>(
      loc, together,
      [&](OpBuilder &tb, Location tl) {
        // The values of segments firstSegment, firstSegment + 1, ...: lane
        // l's load j is value 32j + l of them (those outside the buffer 0).
        Value base =
            tb.create<arith::MulIOp>(tl, firstSegment, i64(tb, components));
        Value end =
            tb.create<arith::MulIOp>(tl, numSegments, i64(tb, components));
        SmallVector<Value> loads;
        for (int64_t j = 0, e = segmentLoads(components); j < e; ++j) {
          Value word = stripeWord(tb, tl, base, j, lane);
          Value inBounds = tb.create<arith::AndIOp>(
              tl,
              tb.create<arith::CmpIOp>(tl, arith::CmpIPredicate::sge, word,
                                       i64(tb, 0)),
              tb.create<arith::CmpIOp>(tl, arith::CmpIPredicate::slt, word,
                                       end));
          // Loads past the warp's last segment's values are skipped.
          if (j > 0)
            inBounds =
                tb.create<arith::AndIOp>(tl, inBounds, laterLoads[j - 1]);
          loads.push_back(
              loadOrZero(tb, tl, buffer, elementType, word, inBounds));
        }
        // A lane's component c is value (segment - firstSegment)F + c of
        // them (lanes without a valid segment read the first's).
        Type i32Type = tb.getI32Type();
        Value offset = tb.create<arith::SelectOp>(
            tl, needs,
            tb.create<arith::SubIOp>(tl, mapped.segment, firstSegment),
            i64(tb, 0));
        Value first = tb.create<arith::MulIOp>(
            tl, tb.create<arith::TruncIOp>(tl, i32Type, offset),
            i32(tb, components));
        SmallVector<Value> values;
        for (int64_t c = 0; c < components; ++c) {
          Value position = tb.create<arith::AddIOp>(tl, first, i32(tb, c));
          Value source =
              tb.create<arith::AndIOp>(tl, position, i32(tb, kWarpSize - 1));
          Value load = tb.create<arith::ShRUIOp>(tl, position, i32(tb, 5));
          SmallVector<Value> shuffled;
          for (Value loaded : loads)
            shuffled.push_back(shuffleFrom(tb, tl, loaded, source));
          values.push_back(
              selectAmong(tb, tl, shuffled, [&](int64_t j) -> Value {
                return tb.create<arith::CmpIOp>(tl, arith::CmpIPredicate::eq,
                                                load, i32(tb, j));
              }));
        }
        tb.create<scf::YieldOp>(tl, values);
      },
      [&](OpBuilder &eb, Location el) {
        // Segments too far apart (empty ones between, or unsorted idx):
        // each lane loads its own.
        auto ifNeeds = eb.create<scf::IfOp>(
            el, needs,
            [&](OpBuilder &nb, Location nl) {
              KernelCodeBuilder code(nb, nl);
              Value base = nb.create<arith::MulIOp>(nl, mapped.segment,
                                                    code.i64(components));
              SmallVector<Value> values;
              for (int64_t c = 0; c < components; ++c)
                values.push_back(
                    code.load(buffer, elementType,
                              nb.create<arith::AddIOp>(nl, base, code.i64(c))));
              nb.create<scf::YieldOp>(nl, values);
            },
            [&](OpBuilder &zb, Location zl) {
              SmallVector<Value> zeros(
                  components, KernelCodeBuilder(zb, zl).zero(elementType));
              zb.create<scf::YieldOp>(zl, zeros);
            });
        eb.create<scf::YieldOp>(el, ifNeeds.getResults());
      });
  return Components(ifTogether.getResults().begin(),
                    ifTogether.getResults().end());
}

void GPUKernelEmitter::emitStripedRows(OpBuilder &b, Value warpRow,
                                       const MappedRow &mapped) {
  Block &body = program.func.getBody().front();
  Operation *terminator = body.getTerminator();
  Value needs = b.create<arith::AndIOp>(
      loc, mapped.inRange,
      KernelCodeBuilder(b, loc).isValidSegment(mapped.segment, numSegments));

  SmallVector<BlockArgument> rowInputs, segmentInputs;
  for (Value row : program.gpuStripedRows())
    if (auto arg = dyn_cast<BlockArgument>(row))
      rowInputs.push_back(arg);
  for (BlockArgument arg : body.getArguments())
    if (program.hasInfo(arg) && !arg.use_empty() &&
        program.info(arg).space == ValueSpace::Segment &&
        program.info(arg).numComponents() <= kWarpSize)
      segmentInputs.push_back(arg);

  // Whether the lanes' segments lie within the window of segments from
  // lane 0's that the warp reads together (a collective, so before the
  // loads: they then are in flight together).
  Value firstSegment, together;
  DenseMap<Value, SmallVector<Value>> laterLoads;
  if (!segmentInputs.empty()) {
    Type i32Type = b.getI32Type();
    firstSegment = b.create<arith::ExtSIOp>(
        loc, b.getI64Type(),
        shuffleFrom(b, loc,
                    b.create<arith::TruncIOp>(loc, i32Type, mapped.segment),
                    i32(b, 0)));
    int64_t window = kWarpSize;
    for (BlockArgument arg : segmentInputs) {
      int64_t components = program.info(arg).numComponents();
      window =
          std::min(window, segmentLoads(components) * kWarpSize / components);
    }
    Value offset = b.create<arith::SubIOp>(loc, mapped.segment, firstSegment);
    Value inWindow = b.create<arith::AndIOp>(
        loc,
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, offset,
                                i64(b, 0)),
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, offset,
                                i64(b, window)));
    Value fits = b.create<arith::OrIOp>(
        loc, inWindow, KernelCodeBuilder(b, loc).logicalNot(needs));
    Value all = i32(b, -1);
    together = b.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::eq,
        b.create<NVVM::VoteBallotOp>(loc, i32Type, all, fits), all);
    // Whether the warp's segments need load j > 0 of each input: a lane's
    // last component lies at or past value 32j.
    for (BlockArgument arg : segmentInputs) {
      int64_t components = program.info(arg).numComponents();
      SmallVector<Value> &used = laterLoads[arg];
      for (int64_t j = 1; j < segmentLoads(components); ++j) {
        Value reaches = b.create<arith::AndIOp>(
            loc, needs,
            b.create<arith::CmpIOp>(
                loc, arith::CmpIPredicate::sgt,
                b.create<arith::MulIOp>(
                    loc, b.create<arith::AddIOp>(loc, offset, i64(b, 1)),
                    i64(b, components)),
                i64(b, j * kWarpSize)));
        used.push_back(b.create<arith::CmpIOp>(
            loc, arith::CmpIPredicate::ne,
            b.create<NVVM::VoteBallotOp>(loc, i32Type, all, reaches),
            i32(b, 0)));
      }
    }
  }

  DenseMap<Value, Components> staged;
  SmallVector<SmallVector<Value>> rowStripes;
  for (BlockArgument arg : rowInputs)
    rowStripes.push_back(loadStripes(b, emitter.argumentBuffer(arg), warpRow,
                                     program.info(arg).numComponents()));
  for (BlockArgument arg : segmentInputs)
    staged[arg] = loadWarpSegments(
        b, emitter.argumentBuffer(arg), program.info(arg).numComponents(),
        mapped, needs, together, firstSegment, laterLoads[arg]);
  for (auto [arg, stripes] : llvm::zip(rowInputs, rowStripes))
    staged[arg] = rowsFromStripes(b, stripes);

  // The row's outputs, 0 for rows without a valid segment.
  SmallVector<Type> types;
  SmallVector<int64_t> widths;
  for (Value result : terminator->getOperands()) {
    widths.push_back(program.info(result).numComponents());
    types.append(widths.back(), program.elementType);
  }
  auto ifRow = b.create<scf::IfOp>(
      loc, needs,
      [&](OpBuilder &tb, Location tl) {
        SmallVector<Components> outputs(widths.size());
        emitter.stageValues(staged, [&](unsigned i, ArrayRef<Value> value) {
          outputs[i].assign(value.begin(), value.end());
        });
        auto oneRow = [&](OpBuilder &ob, Location ol, ValueRange init,
                          SegmentProgramEmitter::RowBody rowBody, bool) {
          return rowBody(ob, ol, mapped.row, /*lanes=*/1,
                         /*laneMask=*/Value(), init);
        };
        emitter.emitSegment(tb, tl, mapped.segment, i64(tb, 1), oneRow,
                            combineNothing, Value());
        emitter.stageValues({}, nullptr);
        SmallVector<Value> flat;
        for (const Components &output : outputs)
          llvm::append_range(flat, output);
        tb.create<scf::YieldOp>(tl, flat);
      },
      [&](OpBuilder &eb, Location el) {
        SmallVector<Value> zeros(
            types.size(), KernelCodeBuilder(eb, el).zero(program.elementType));
        eb.create<scf::YieldOp>(el, zeros);
      });

  SmallVector<Value> results(ifRow.getResults());
  size_t position = 0;
  for (auto [i, components] : llvm::enumerate(widths)) {
    ArrayRef<Value> row = ArrayRef<Value>(results).slice(position, components);
    position += components;
    Value buffer = emitter.resultBuffer(i);
    if (SegmentProgram::isGPUStripedWidth(components)) {
      storeStripedRows(b, buffer, warpRow, row);
      continue;
    }
    // Other widths: a lane stores its own row.
    auto ifStore = b.create<scf::IfOp>(loc, mapped.inRange, /*withElse=*/false);
    OpBuilder sb = ifStore.getThenBodyBuilder();
    Value base = sb.create<arith::MulIOp>(loc, mapped.row, i64(sb, components));
    for (auto [c, value] : llvm::enumerate(row))
      KernelCodeBuilder(sb, loc).store(
          value, buffer,
          sb.create<arith::AddIOp>(loc, base,
                                   i64(sb, static_cast<int64_t>(c))));
  }
}

SmallVector<Value> GPUKernelEmitter::stripedReductionLoop(OpBuilder &b,
                                                          Value lo, Value hi,
                                                          ValueRange init) {
  // A step of 32 rows from `row` reads values [F row, F row + 32F) of an
  // input of F components, load k of lane l value F row + 32k + l:
  // component (32k + l) mod F, since every row starts at a multiple of F.
  // No lane waits on another's loads, so the loop keeps a lane's loads in
  // flight as laneRowLoop does.
  SmallVector<SegmentProgram::StripedReduction> reductions =
      program.gpuStripedReductions();
  Type elementType = program.elementType;
  // Each input's values of the rows [lo, hi): [first, first + span).
  struct Input {
    Value buffer, first, span, identity;
  };
  SmallVector<Input> inputs;
  for (const SegmentProgram::StripedReduction &reduction : reductions) {
    Value components = i64(b, reduction.components);
    inputs.push_back(
        {emitter.argumentBuffer(reduction.input),
         b.create<arith::MulIOp>(loc, lo, components),
         b.create<arith::MulIOp>(loc, b.create<arith::SubIOp>(loc, hi, lo),
                                 components),
         arith::getIdentityValue(reduction.kind, elementType, b, loc)});
  }
  // One step from `row`: masked (its values outside [lo, hi) read a word
  // inside and count as the identity) for the first and the last, not for
  // the full steps between, whose loads then differ by constant offsets.
  auto step = [&](OpBuilder &sb, Location sl, Value row, ValueRange acc,
                  bool masked) {
    SmallVector<Value> next;
    for (auto [reduction, input] : llvm::zip_equal(reductions, inputs)) {
      Value laneWord = sb.create<arith::AddIOp>(
          sl, sb.create<arith::MulIOp>(sl, row, i64(sb, reduction.components)),
          lane);
      Value laneOffset, span32;
      if (masked) {
        Type i32Type = sb.getI32Type();
        laneOffset = sb.create<arith::TruncIOp>(
            sl, i32Type, sb.create<arith::SubIOp>(sl, laneWord, input.first));
        span32 = sb.create<arith::TruncIOp>(sl, i32Type, input.span);
      }
      for (int64_t k = 0; k < reduction.components; ++k) {
        Value word =
            sb.create<arith::AddIOp>(sl, laneWord, i64(sb, k * kWarpSize));
        if (!masked) {
          next.push_back(arith::getReductionOp(
              reduction.kind, sb, sl, acc[next.size()],
              KernelCodeBuilder(sb, sl).load(input.buffer, elementType, word)));
          continue;
        }
        // word in [first, first + span): one unsigned comparison, in 32
        // bits (a tile piece has at most a tile's rows).
        Value inside = sb.create<arith::CmpIOp>(
            sl, arith::CmpIPredicate::ult,
            sb.create<arith::AddIOp>(sl, laneOffset, i32(sb, k * kWarpSize)),
            span32);
        auto ifInside = sb.create<scf::IfOp>(
            sl, inside,
            [&](OpBuilder &tb, Location tl) {
              tb.create<scf::YieldOp>(tl, KernelCodeBuilder(tb, tl).load(
                                              input.buffer, elementType, word));
            },
            [&](OpBuilder &eb, Location el) {
              eb.create<scf::YieldOp>(el, input.identity);
            });
        Value value = ifInside.getResult(0);
        next.push_back(arith::getReductionOp(reduction.kind, sb, sl,
                                             acc[next.size()], value));
      }
    }
    return next;
  };
  auto maskedStep = [&](OpBuilder &sb, Value when, Value row, ValueRange acc) {
    auto ifStep = sb.create<scf::IfOp>(
        loc, when,
        [&](OpBuilder &tb, Location tl) {
          tb.create<scf::YieldOp>(tl, step(tb, tl, row, acc, true));
        },
        [&](OpBuilder &eb, Location el) { eb.create<scf::YieldOp>(el, acc); });
    return SmallVector<Value>(ifStep.getResults());
  };
  // Steps from lo's chunk, whole sectors each. A piece starts at a tile's
  // first row (lo is its chunk's) or ends at a tile's end, a multiple of
  // 32 (the chunk's steps are lo's): never a step more.
  Value first = b.create<arith::AndIOp>(loc, lo, i64(b, -kWarpSize));
  Value step32 = i64(b, kWarpSize);
  SmallVector<Value> head = maskedStep(
      b, b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, lo, hi), first,
      init);
  // Full steps after the first: [fullFrom, fullEnd).
  Value fullFrom = b.create<arith::AddIOp>(loc, first, step32);
  Value fullRows = b.create<arith::MaxSIOp>(
      loc, b.create<arith::SubIOp>(loc, hi, fullFrom), i64(b, 0));
  Value fullEnd = b.create<arith::AddIOp>(
      loc, fullFrom,
      b.create<arith::AndIOp>(loc, fullRows, i64(b, -kWarpSize)));
  auto loop = b.create<scf::ForOp>(
      loc, fullFrom, fullEnd, step32, head,
      [&](OpBuilder &ib, Location il, Value row, ValueRange acc) {
        ib.create<scf::YieldOp>(il, step(ib, il, row, acc, false));
      });
  SmallVector<Value> accumulators = maskedStep(
      b, b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, fullEnd, hi),
      fullEnd, loop.getResults());
  // Accumulator k of an input holds its component (32k + l) mod F: put
  // them in component order (stripeOfComponents).
  SmallVector<Value> partials;
  unsigned position = 0;
  for (const SegmentProgram::StripedReduction &reduction : reductions) {
    ArrayRef<Value> held =
        ArrayRef<Value>(accumulators).slice(position, reduction.components);
    position += reduction.components;
    if (reduction.components == 1) {
      partials.push_back(held.front());
      continue;
    }
    SmallVector<Value> stripeOf = stripeOfComponents(b, reduction.components);
    for (int64_t c = 0; c < reduction.components; ++c)
      partials.push_back(selectAmong(b, loc, held, [&](int64_t k) -> Value {
        return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                       stripeOf[c], i32(b, k));
      }));
  }
  return partials;
}
