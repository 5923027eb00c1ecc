//===- strata-opt.cpp - run any strata pass on IR -------------------------===//
//
// mlir-opt over strata's dialects and passes: --pass-pipeline,
// --mlir-print-ir-after-all, --verify-diagnostics and the rest work as there.
//
//===----------------------------------------------------------------------===//
#include "compiler/Registration.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  strata::registerDialects(registry);
  strata::registerPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "strata optimizer driver\n", registry));
}
