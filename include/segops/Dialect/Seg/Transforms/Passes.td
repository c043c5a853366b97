//===- Passes.td - seg dialect transformations -------------*- tablegen -*-===//

#ifndef SEGOPS_DIALECT_SEG_TRANSFORMS_PASSES_TD
#define SEGOPS_DIALECT_SEG_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def SegDifferentiate : Pass<"seg-differentiate", "ModuleOp"> {
  let summary = "Derive reverse-mode gradient functions of seg functions";
  let description = [{
    For a `func.func @f` built from seg ops and elementwise arith/math ops on
    tensors, adds `func.func @f_grad` (the suffix is an option) that takes
    `f`'s arguments followed by one cotangent per floating-point tensor result
    and returns the gradients of the chosen arguments, in order. The body
    recomputes the primal values it needs and then applies each op's
    ReverseDifferentiableOpInterface rule in reverse order, summing adjoints
    of values used more than once. Integer arguments (idx) and sizes
    (num_segments) get no gradient; an argument no output depends on gets
    zeros. Because every rule is written with ops that have rules themselves,
    `@f_grad` can be differentiated again (second and third order).

    With `saved-results`, `@f_grad` takes `f`'s floating-point results
    after its arguments and before the cotangents: the values a caller
    kept from the forward (an autograd node saves its outputs). The reverse
    sweep reads them where a rule uses a result, so the recomputation of a
    result that only the rules use drops out: rms_norm's backward reads
    its rows once instead of twice, max's twice instead of three times.

    Run `-canonicalize -cse` afterwards to drop the unused primal
    recomputation and shared subexpressions (the `seg-derive` pipeline does
    both).

    Example:

    ```
    seg-opt f.mlir --seg-differentiate="function=f wrt=0,1"
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"\"",
           "Function to differentiate (default: every function with seg ops "
           "whose name does not end in the suffix)">,
    ListOption<"wrt", "wrt", "unsigned",
               "Argument positions to differentiate with respect to "
               "(default: every floating-point tensor argument, except "
               "one no result depends on whose space is unknown)">,
    Option<"suffix", "suffix", "std::string",
           /*default=*/"::segrt::kGradientSuffix",
           "Suffix of the gradient function's name (segrt/OpLibrary.h)">,
    Option<"savedResults", "saved-results", "bool", /*default=*/"false",
           "The gradient function takes the primal's floating-point results "
           "(after its arguments, before the cotangents) instead of "
           "recomputing them">,
    Option<"onlySuffix", "only-suffix", "std::string", /*default=*/"\"\"",
           "Without `function`: differentiate exactly the functions whose "
           "names end in this (e.g. _grad, for second order)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // SEGOPS_DIALECT_SEG_TRANSFORMS_PASSES_TD
