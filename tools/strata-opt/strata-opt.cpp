//===- strata-opt.cpp - run any strata pass on IR -------------------------===//
//
// mlir-opt over strata's dialects and passes: --pass-pipeline,
// --mlir-print-ir-after-all, --verify-diagnostics and the rest work as there.
// The input is read as strata reads every file (a directory, a device or a
// file past the IR's size refused in one line), and -o naming the input is
// refused: the IR would be replaced by what the passes made of it.
//
//===----------------------------------------------------------------------===//
#include "compiler/Registration.h"
#include "runtime/base/WholeFile.h"

#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  strata::registerDialects(registry);
  strata::registerPasses();
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "strata optimizer driver\n", registry);
  auto fail = [](const std::string &message) {
    llvm::errs() << "strata-opt: error: " << message << "\n";
    return 1;
  };
  namespace rt = strata::runtime;
  if (std::string error = rt::checkNotInput(output, input, rt::kIrFile);
      !error.empty())
    return fail(error);
  std::string source;
  if (std::string error = rt::readFileWhole(input, source, rt::kIrFile);
      !error.empty())
    return fail(error);
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      llvm::MemoryBuffer::getMemBufferCopy(source,
                                           input == "-" ? "<stdin>" : input);
  source = std::string();

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file =
      mlir::openOutputFile(output, &error);
  if (!file)
    return fail(error);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (mlir::failed(
          mlir::MlirOptMain(file->os(), std::move(buffer), registry, config)))
    return 1;
  file->keep();
  return 0;
}
