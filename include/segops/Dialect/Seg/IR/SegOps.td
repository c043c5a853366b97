//===- SegOps.td - seg dialect operations ------------------*- tablegen -*-===//
//
// The six public segment operations, one per API function, and the
// operations that their gradients are expressed in (gather by index,
// per-segment outer-product sum, segment count).
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_DIALECT_SEG_IR_SEGOPS_TD
#define SEGOPS_DIALECT_SEG_IR_SEGOPS_TD

include "segops/Dialect/Seg/IR/SegBase.td"
include "segops/Dialect/Seg/IR/SegInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Per-segment reductions of one row tensor: sum, mean, rms_norm, max, min.
//===----------------------------------------------------------------------===//

/// The SegmentOpInterface of a reduction, with the methods it defines
/// beyond the ones every reduction does.
class Seg_ReductionInterface<list<string> methods = []>
    : DeclareOpInterfaceMethods<Seg_SegmentOpInterface,
        !listconcat(["getSegmentCount", "isReduction"], methods)>;

class Seg_UnaryReductionOp<string mnemonic, list<string> methods = []>
    : Seg_Op<mnemonic, [Pure,
        DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>,
        Seg_ReductionInterface<methods>]> {
  let arguments = (ins Seg_FloatTensor:$x, Seg_IndexTensor:$idx,
                       Index:$num_segments);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $idx `,` $num_segments attr-dict `:` type($x) `,` type($idx)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Seg_SumOp : Seg_UnaryReductionOp<"sum",
    ["isMultilinear", "reducesOperandAsIs"]> {
  let summary = "Per-segment sum of rows";
  let description = [{
    `out[s] = sum_{i : idx[i] == s} x[i]` for `s` in `[0, num_segments)`.
    `x` is `(N)` or `(N,F)` (F static: 3-vectors or wide feature rows); the
    result is `(S)` or `(S,F)` with the same
    width and element type. Empty segments give 0.

    Example:

    ```mlir
    %out = seg.sum %x, %idx, %n
        : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
    ```
  }];
}

def Seg_MeanOp : Seg_UnaryReductionOp<"mean",
    ["buildEpilogue", "isMultilinear", "reducesOperandAsIs"]> {
  let summary = "Per-segment mean of rows";
  let description = [{
    `out[s] = sum_{i : idx[i] == s} x[i] / count(s)`, and 0 for an empty
    segment (never NaN). Shapes as for `seg.sum`.

    Example:

    ```mlir
    %out = seg.mean %x, %idx, %n : tensor<?xf64>, tensor<?xi32> -> tensor<?xf64>
    ```
  }];
}

def Seg_RmsNormOp : Seg_UnaryReductionOp<"rms_norm",
    ["buildRowComponents", "buildEpilogue", "hasCostlyEpilogue"]> {
  let summary = "Per-segment root-mean-square vector norm";
  let description = [{
    `out[s] = sqrt(sum_{i : idx[i] == s} |x[i]|^2 / count(s))`, and 0 for an
    empty segment. `x` is `(N,F)` (or `(N)`, where `|x[i]|` is the absolute
    value); the result is `(S)`.

    Example:

    ```mlir
    %out = seg.rms_norm %x, %idx, %n
        : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
    ```
  }];
}

class Seg_ExtremumOp<string mnemonic>
    : Seg_UnaryReductionOp<mnemonic,
        ["getCombiningKind", "buildEpilogue", "reducesOperandAsIs"]>;

def Seg_MaxOp : Seg_ExtremumOp<"max"> {
  let summary = "Per-segment maximum of rows, componentwise";
  let description = [{
    `out[s] = max_{i : idx[i] == s} x[i]`, per component for `(N,F)` rows;
    0 for an empty segment (as torch_scatter's scatter_max). A NaN row
    makes its segment's result NaN. Shapes as for `seg.sum`.

    Gradient: a segment's cotangent is split evenly among the rows that
    attain its maximum (per component): `x̄[i] = ḡ[s] [x[i] == out[s]] /
    #{j : x[j] == out[s]}`, so that `seg.sum` of the gradient over a
    segment's rows is its cotangent, and ties are symmetric.

    Example:

    ```mlir
    %out = seg.max %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
    ```
  }];
}

def Seg_MinOp : Seg_ExtremumOp<"min"> {
  let summary = "Per-segment minimum of rows, componentwise";
  let description = [{
    `out[s] = min_{i : idx[i] == s} x[i]`, per component; 0 for an empty
    segment. Ties share the gradient evenly, as for `seg.max`.

    Example:

    ```mlir
    %out = seg.min %x, %idx, %n
        : tensor<?x3xf64>, tensor<?xi32> -> tensor<?x3xf64>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// seg.dot
//===----------------------------------------------------------------------===//

def Seg_DotOp : Seg_Op<"dot", [Pure,
    DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>,
    Seg_ReductionInterface<["buildRowComponents", "isMultilinear"]>]> {
  let summary = "Per-segment dot product of two row tensors";
  let description = [{
    `out[s] = sum_{i : idx[i] == s} dot(x[i], y[i])`. `x` and `y` have the
    same type, `(N)` or `(N,F)`; the result is `(S)`.

    Example:

    ```mlir
    %out = seg.dot %x, %y, %idx, %n
        : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
    ```
  }];
  let arguments = (ins Seg_FloatTensor:$x, Seg_FloatTensor:$y,
                       Seg_IndexTensor:$idx, Index:$num_segments);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $y `,` $idx `,` $num_segments attr-dict `:` type($x) `,` type($y)
    `,` type($idx) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// seg.mul
//===----------------------------------------------------------------------===//

def Seg_MulOp : Seg_Op<"mul", [Pure,
    DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>,
    DeclareOpInterfaceMethods<Seg_SegmentOpInterface,
        ["getSegmentOperands", "buildRowComponents", "isMultilinear"]>]> {
  let summary = "Scale each row by its segment's scalar";
  let description = [{
    `out[i] = x[i] * y[idx[i]]`, and 0 where `idx[i]` is outside
    `[0, dim(y, 0))`. `x` is `(N)` or `(N,F)`, `y` is `(S)`; the result has
    the type of `x`. The number of segments is the length of `y`.

    Example:

    ```mlir
    %out = seg.mul %x, %y, %idx
        : tensor<?x3xf32>, tensor<?xf32>, tensor<?xi32> -> tensor<?x3xf32>
    ```
  }];
  let arguments = (ins Seg_FloatTensor:$x, Seg_FloatTensor:$y,
                       Seg_IndexTensor:$idx);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $y `,` $idx attr-dict `:` type($x) `,` type($y) `,` type($idx)
    `->` type($result)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// seg.matvec
//===----------------------------------------------------------------------===//

def Seg_MatvecOp : Seg_Op<"matvec", [Pure,
    DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>,
    DeclareOpInterfaceMethods<Seg_SegmentOpInterface,
        ["getSegmentOperands", "buildRowComponents", "isMultilinear"]>]> {
  let summary = "Multiply each row vector by its segment's 3x3 matrix";
  let description = [{
    With `transpose` (the default, the public operation):
    `out[i] = m[idx[i]]^T v[i]`; without it: `out[i] = m[idx[i]] v[i]` (the
    form that the gradient with respect to `v` needs). Rows whose index is
    outside `[0, dim(m, 0))` give 0. `v` is `(N,3)`, `m` is `(S,3,3)`, and the
    result is `(N,3)`.

    Example:

    ```mlir
    %out = seg.matvec %v, %m, %idx
        : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
    %mv = seg.matvec %v, %m, %idx {transpose = false}
        : tensor<?x3xf32>, tensor<?x3x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
    ```
  }];
  let arguments = (ins Seg_FloatTensor:$v, Seg_FloatTensor:$m,
                       Seg_IndexTensor:$idx,
                       DefaultValuedAttr<BoolAttr, "true">:$transpose);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = [{
    $v `,` $m `,` $idx attr-dict `:` type($v) `,` type($m) `,` type($idx)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradient-side operations.
//===----------------------------------------------------------------------===//

def Seg_GatherOp : Seg_Op<"gather", [Pure,
    DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>,
    DeclareOpInterfaceMethods<Seg_SegmentOpInterface,
        ["getSegmentOperands", "isMultilinear"]>]> {
  let summary = "Broadcast per-segment rows to the rows of their segment";
  let description = [{
    `out[i] = y[idx[i]]`, and 0 where `idx[i]` is outside `[0, dim(y, 0))`.
    `y` is `(S)` or `(S,F)`; the result is `(N)` or `(N,F)` with `N` the
    length of `idx`. It is the adjoint of `seg.sum`.

    Example:

    ```mlir
    %out = seg.gather %y, %idx : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
    ```
  }];
  let arguments = (ins Seg_FloatTensor:$y, Seg_IndexTensor:$idx);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = [{
    $y `,` $idx attr-dict `:` type($y) `,` type($idx) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Seg_OuterSumOp : Seg_Op<"outer_sum", [Pure,
    DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>,
    Seg_ReductionInterface<["buildRowComponents", "isMultilinear"]>]> {
  let summary = "Per-segment sum of outer products of row vectors";
  let description = [{
    `out[s] = sum_{i : idx[i] == s} v[i] g[i]^T`: the gradient of
    `seg.matvec` with respect to its matrices. `v` and `g` are `(N,3)`; the
    result is `(S,3,3)`.

    Example:

    ```mlir
    %out = seg.outer_sum %v, %g, %idx, %n
        : tensor<?x3xf32>, tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3x3xf32>
    ```
  }];
  let arguments = (ins Seg_FloatTensor:$v, Seg_FloatTensor:$g,
                       Seg_IndexTensor:$idx, Index:$num_segments);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = [{
    $v `,` $g `,` $idx `,` $num_segments attr-dict `:` type($v) `,` type($g)
    `,` type($idx) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Seg_CountOp : Seg_Op<"count", [Pure,
    DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>,
    DeclareOpInterfaceMethods<Seg_SegmentOpInterface,
        ["getSegmentCount", "buildFromRowCount"]>]> {
  let summary = "Number of rows in each segment";
  let description = [{
    `out[s] = |{i : idx[i] == s}|` as a floating-point value, the
    denominator of `seg.mean` and `seg.rms_norm` and of their gradients.

    Example:

    ```mlir
    %c = seg.count %idx, %n : tensor<?xi32> -> tensor<?xf64>
    ```
  }];
  let arguments = (ins Seg_IndexTensor:$idx, Index:$num_segments);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = [{
    $idx `,` $num_segments attr-dict `:` type($idx) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Message passing: rows of a table by a second index, and its adjoint.
//===----------------------------------------------------------------------===//

def Seg_GatherRowsOp : Seg_Op<"gather_rows", [Pure,
    DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>]> {
  let summary = "Gather rows of a table by a second index, in any order";
  let description = [{
    `out[i] = table[j[i]]`: the sender side of message passing (`pos[j]`
    with `j` the unsorted senders of edges grouped by receiver). `j` is an
    index other than the function's segment index, one `i32` per row, in
    any order; `table` is `(M)` or `(M,F)`, a function argument in kernel
    functions (its rows are read at random), and the result `(N)` or
    `(N,F)` with `N` the length of `j`. Kernels read the table where the
    gathered value is used (it stays in registers); `j`'s values must lie
    in `[0, M)`, which the runtime checks before a kernel runs (kernels do
    not see M).

    Its adjoint is `seg.scatter_sum` by the same `j` into the table's M
    rows, whose adjoint is this op again: the pair is closed under
    differentiation.

    Example:

    ```mlir
    %pj = seg.gather_rows %pos, %j
        : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
    ```
  }];
  let arguments = (ins Seg_FloatTensor:$table, Seg_IndexTensor:$j);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $j attr-dict `:` type($table) `,` type($j) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Seg_ScatterSumOp : Seg_Op<"scatter_sum", [Pure,
    DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>]> {
  let summary = "Sum rows into a table's rows by a second index";
  let description = [{
    `out[m] = sum_{i : j[i] == m} x[i]` for `m` in `[0, num_rows)`: the
    adjoint of `seg.gather_rows` (forces on senders). `j` is a second index
    in any order, as for `seg.gather_rows`; `x` is `(N)` or `(N,F)` and the
    result `(M)` or `(M,F)` with M = `num_rows`.

    In kernel functions its result must be returned as it is: the kernel
    writes the N rows of `x` and the runtime sums them by `j`, in a
    grouping fixed by N and M alone (chunks of rows, or `j`'s transposed
    order), so results are bitwise the same on any thread count.

    Example:

    ```mlir
    %m = tensor.dim %pos, %c0 : tensor<?x3xf32>
    %f = seg.scatter_sum %g, %j, %m
        : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
    ```
  }];
  let arguments = (ins Seg_FloatTensor:$x, Seg_IndexTensor:$j,
                       Index:$num_rows);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $j `,` $num_rows attr-dict `:` type($x) `,` type($j)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Per-element shape changes (no segment index): broadcast and component sum.
//===----------------------------------------------------------------------===//

def Seg_BroadcastOp : Seg_Op<"broadcast", [Pure,
    DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>,
    DeclareOpInterfaceMethods<Seg_ComponentOpInterface>]> {
  let summary = "Broadcast each scalar element to a row of F features";
  let description = [{
    `out[i, c] = x[i]` for `c` in `[0, F)`: a per-row (or per-segment)
    scalar against rows of F features (3-vectors, or wide feature rows),
    as in PyTorch's `w[:, None] * h`. `x` is `(L)`, the result `(L,F)` of
    the same element type, F static. Its adjoint is `seg.component_sum`.

    Example:

    ```mlir
    %b = seg.broadcast %w : tensor<?xf32> -> tensor<?x3xf32>
    ```
  }];
  let arguments = (ins Seg_FloatTensor:$x);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Seg_ComponentSumOp : Seg_Op<"component_sum", [Pure,
    DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>,
    DeclareOpInterfaceMethods<Seg_ComponentOpInterface,
                              ["getComponentCombiningKind"]>]> {
  let summary = "Sum of each element's F components";
  let description = [{
    `out[i] = x[i, 0] + ... + x[i, F-1]`, added in component order:
    PyTorch's `x.sum(-1)` on rows of F features (with `arith.mulf`, the
    row dot `(a * b).sum(-1)`). `x` is `(L,F)` with a static F, the result
    `(L)`. Its adjoint is `seg.broadcast`.

    Example:

    ```mlir
    %s = seg.component_sum %x : tensor<?x3xf32> -> tensor<?xf32>
    ```
  }];
  let arguments = (ins Seg_FloatTensor:$x);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

class Seg_ComponentExtremumOp<string mnemonic, string which>
    : Seg_Op<mnemonic, [Pure,
        DeclareOpInterfaceMethods<Seg_ReverseDifferentiableOpInterface>,
        DeclareOpInterfaceMethods<Seg_ComponentOpInterface,
                                  ["getComponentCombiningKind"]>]> {
  let summary = "The " # which # " of each element's F components";
  let arguments = (ins Seg_FloatTensor:$x);
  let results = (outs Seg_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Seg_ComponentMaxOp : Seg_ComponentExtremumOp<"component_max", "maximum"> {
  let description = [{
    `out[i] = max_c x[i, c]`, NaN if a component is (`arith.maximumf`):
    PyTorch's `x.amax(-1)` on rows of F features. `x` is `(L,F)` with a
    static F, the result `(L)`. Its adjoint shares `ḡ[i]` evenly among the
    components attaining the maximum, as PyTorch's does.

    Example:

    ```mlir
    %m = seg.component_max %h : tensor<?x16xf32> -> tensor<?xf32>
    ```
  }];
}

def Seg_ComponentMinOp : Seg_ComponentExtremumOp<"component_min", "minimum"> {
  let description = [{
    `out[i] = min_c x[i, c]` (`arith.minimumf`): PyTorch's `x.amin(-1)`;
    as `seg.component_max` otherwise.

    Example:

    ```mlir
    %m = seg.component_min %h : tensor<?x16xf32> -> tensor<?xf32>
    ```
  }];
}

#endif // SEGOPS_DIALECT_SEG_IR_SEGOPS_TD
