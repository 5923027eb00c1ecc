//===- CudaEpilogues.cpp - gemm epilogues as cuBLASLt computes them -------===//
//
// Two of the exec.gemm epilogues mean something cuBLASLt computes
// differently: its GELU epilogue is the tanh approximation (the model's
// GELU is the exact erf form), and its bias-gradient epilogue overwrites
// the bias where the plan accumulates into it (beta 1 over microbatches).
// For the CUDA target the gemm keeps what cuBLASLt does as the plan means
// it (the bias add) and the rest becomes a launch of the catalog right
// after it, which the generated kernels compute exactly as the CPU does:
//   gelu_bias:  gemm with bias into aux, then gelu_fwd aux -> D
//   bias_grad:  gemm without epilogue, then sum_to op(B) -> bias
// The CPU runs the rewritten plan to the same numbers (the same sums in
// the same order).
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "dialects/exec/ExecDialect.h"
#include "runtime/plan/KernelCatalog.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace strata {
#define GEN_PASS_DEF_CUDAEPILOGUES
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

int64_t elementsOf(exec::BufferOp buffer) {
  return cast<ShapedType>(buffer.getType()).getNumElements();
}

/// A launch of `kernel` reading `input` into `output`, after `gemm`, on
/// its stream and under its condition.
void launchAfter(exec::GemmOp gemm, runtime::KernelId kernel,
                 FlatSymbolRefAttr input, FlatSymbolRefAttr output,
                 ArrayRef<NamedAttribute> args) {
  OpBuilder b(gemm->getContext());
  b.setInsertionPointAfter(gemm);
  exec::LaunchOp::create(
      b, gemm.getLoc(), b.getStringAttr(runtime::kernelName(kernel)),
      b.getArrayAttr({input}), b.getArrayAttr({output}),
      b.getDictionaryAttr(args), DictionaryAttr(), DenseI64ArrayAttr(),
      DenseI64ArrayAttr(), IntegerAttr(), StringAttr(), gemm.getStreamAttr(),
      gemm.getWhenAttr());
}

/// Rewrites one gemm; fails (with a message) on a shape the rewrite cannot
/// express as a launch over whole buffers.
LogicalResult rewrite(exec::GemmOp gemm,
                      const llvm::StringMap<exec::BufferOp> &buffers) {
  auto whole = [&](FlatSymbolRefAttr name, int64_t rows, int64_t cols,
                   int64_t ld) {
    exec::BufferOp buffer = buffers.lookup(name.getValue());
    return buffer && gemm.getBatch() == 1 && ld == cols &&
           elementsOf(buffer) == rows * cols;
  };
  OpBuilder b(gemm->getContext());
  if (gemm.getEpilogue() == exec::Epilogue::GeluBias) {
    FlatSymbolRefAttr aux = gemm.getAuxAttr(), d = gemm.getDAttr();
    if (gemm.getBeta().convertToFloat() != 0 ||
        !whole(aux, gemm.getM(), gemm.getN(), gemm.getLdd()) ||
        !whole(d, gemm.getM(), gemm.getN(), gemm.getLdd()))
      return gemm.emitOpError()
             << "epilogue gelu_bias needs beta 0 and D and aux whole, "
                "unbatched [m, n] buffers for the CUDA target";
    gemm.setDAttr(aux);
    gemm.removeAuxAttr();
    gemm.setEpilogue(exec::Epilogue::Bias);
    launchAfter(gemm, runtime::KernelId::GeluFwd, aux, d, {});
    return success();
  }
  if (gemm.getEpilogue() == exec::Epilogue::BiasGrad) {
    FlatSymbolRefAttr source = gemm.getBAttr(), bias = gemm.getBiasAttr();
    if (gemm.getTransposeB() ||
        !whole(source, gemm.getK(), gemm.getN(), gemm.getLdb()))
      return gemm.emitOpError()
             << "epilogue bias_grad needs op(B) an untransposed, whole, "
                "unbatched [k, n] buffer for the CUDA target";
    bool accumulate = gemm.getBeta().convertToFloat() != 0;
    gemm.removeBiasAttr();
    gemm.setEpilogue(exec::Epilogue::None);
    launchAfter(gemm, runtime::KernelId::SumTo, source, bias,
                {b.getNamedAttr("accumulate", b.getBoolAttr(accumulate))});
    return success();
  }
  return success();
}

struct CudaEpiloguesPass
    : public strata::impl::CudaEpiloguesBase<CudaEpiloguesPass> {
  void runOnOperation() override {
    for (auto stage : getOperation().getOps<exec::TemplateOp>()) {
      llvm::StringMap<exec::BufferOp> buffers;
      for (auto buffer : stage.getBody().front().getOps<exec::BufferOp>())
        buffers[buffer.getSymName()] = buffer;
      WalkResult walked = stage.walk([&](exec::GemmOp gemm) {
        return failed(rewrite(gemm, buffers)) ? WalkResult::interrupt()
                                              : WalkResult::advance();
      });
      if (walked.wasInterrupted())
        return signalPassFailure();
    }
  }
};

} // namespace
