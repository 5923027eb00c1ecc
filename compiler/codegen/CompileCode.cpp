//===- CompileCode.cpp - the module's generated kernels to PTX ------------===//
#include "compiler/codegen/CompileCode.h"
#include "compiler/codegen/Nvrtc.h"
#include "dialects/exec/ExecDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"

namespace strata::codegen {

using namespace mlir;

LogicalResult compileGeneratedCode(ModuleOp module) {
  auto arch = module->getAttrOfType<StringAttr>(exec::kCudaArchAttr);
  if (!arch)
    return module.emitError()
           << "has no strata.cuda_arch: its kernels were not generated "
              "(--strata-cuda-codegen)";
  SmallVector<exec::CodeOp> codes(module.getOps<exec::CodeOp>());
  std::vector<std::string> ptx(codes.size()), errors(codes.size());
  std::string target = arch.str();
  // The ops are only read here; the PTX is set afterwards, in order.
  (void)failableParallelForEachN(
      module.getContext(), 0, codes.size(), [&](size_t i) {
        errors[i] = compileToPtx(codes[i].getSource().str(),
                                 codes[i].getSymName().str(), target, ptx[i]);
        return success(errors[i].empty());
      });
  Builder b(module.getContext());
  for (size_t i = 0; i < codes.size(); ++i) {
    if (!errors[i].empty())
      return codes[i].emitError() << errors[i];
    codes[i].setPtxAttr(b.getStringAttr(ptx[i]));
  }
  return success();
}

} // namespace strata::codegen
