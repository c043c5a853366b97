//===- KernelSignature.cpp - kernel signatures from the call contract -----===//

#include "segops/Conversion/KernelSignature.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::seg;
namespace abi = segrt::abi;

SmallVector<Type> mlir::seg::kernelParameterTypes(MLIRContext *context,
                                                  unsigned numBuffers,
                                                  abi::Entry entry) {
  Type pointer = LLVM::LLVMPointerType::get(context);
  Type i64 = IntegerType::get(context, 64);
  SmallVector<Type> types(numBuffers, pointer);
  for (const abi::Parameter &parameter : abi::signature(entry))
    types.push_back(parameter.kind == abi::ParamKind::Pointer ? pointer : i64);
  return types;
}

void mlir::seg::nameTrailingArguments(FunctionOpInterface kernel,
                                      unsigned numBuffers, abi::Entry entry) {
  MLIRContext *context = kernel->getContext();
  unsigned position = numBuffers;
  for (const abi::Parameter &parameter : abi::signature(entry))
    kernel.setArgAttr(position++, "seg.param",
                      StringAttr::get(context, llvm::StringRef(
                                                   parameter.name.data(),
                                                   parameter.name.size())));
}

SmallVector<Type> mlir::seg::kernelResultTypes(MLIRContext *context,
                                               abi::Entry entry) {
  switch (abi::signature(entry).result) {
  case abi::Result::None:
    return {};
  case abi::Result::I64:
    return {IntegerType::get(context, 64)};
  case abi::Result::I32:
    return {IntegerType::get(context, 32)};
  }
  llvm_unreachable("every result kind is handled");
}

Value KernelArguments::lookup(abi::Param param) const {
  int position = signature.position(param);
  if (position < 0)
    return Value();
  return arguments[numBuffers + position];
}

Value KernelArguments::get(abi::Param param) const {
  Value value = lookup(param);
  assert(value && "the kernel's entry point does not take this parameter");
  return value;
}
