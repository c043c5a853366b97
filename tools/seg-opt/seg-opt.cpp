//===- seg-opt.cpp - the segops optimizer driver --------------------------===//
//
// mlir-opt for the seg dialect: parses, verifies, runs passes and pipelines
// (`--seg-to-ptx`, `--seg-to-host`, ...) and prints the result.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "segops/Registration.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::seg::registerSegDialects(registry);
  mlir::seg::registerSegPassesAndPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "segops optimizer driver\n", registry));
}
