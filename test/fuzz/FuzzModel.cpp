//===- FuzzModel.cpp - the model language's frontend
//--------------------------===//
//
// Model files are written by hand: any text is parsed, checked and built
// into graph IR, or refused with a diagnostic, without a crash, a stack
// overflow or an op built from arguments of the wrong kind. What is built
// must verify.
//
//===----------------------------------------------------------------------===//
#include "dialects/graph/GraphDialect.h"
#include "frontend/Frontend.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static MLIRContext *context = [] {
    DialectRegistry registry;
    registry.insert<strata::graph::GraphDialect, func::FuncDialect>();
    auto *made = new MLIRContext(registry);
    made->loadAllAvailableDialects();
    // Diagnostics are the point of most inputs: dropped, not printed.
    made->getDiagEngine().registerHandler(
        [](Diagnostic &) { return success(); });
    return made;
  }();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz.model"),
      llvm::SMLoc());
  OwningOpRef<ModuleOp> module = strata::frontend::buildModel(
      *context, sourceMgr, {}, [](const llvm::Twine &) {});
  if (module && failed(verify(*module)))
    __builtin_trap(); // the frontend built IR that does not verify
  return 0;
}
