//===- FuseEpilogues.cpp - what each gemm's epilogue does -----------------===//
//
// A gemm can finish its output before writing it: add a bias (cuBLASLt's
// BIAS), add a bias and apply a GELU keeping the biased product
// (GELU_AUX_BIAS), or, for a weight gradient dW = xᵀ·dy, sum dy's columns
// into the bias's gradient beside it (BGRADB). This pass decides which
// graph ops a gemm does that way and marks them (ExecOps.td's
// `exec.epilogue` on the gemm's op, `exec.absorbed` on what it absorbs);
// the exec lowering builds the epilogue from the marks and lowers nothing
// for an absorbed op. Without the marks every op is an instruction of its
// own, which is as correct and slower.
//
// The rules, each a shape the gemm's epilogue computes exactly:
//   matmul → add of a vector of the product's last dimension, the
//     product's only use                            epilogue bias
//   ... → an erf GELU of that sum                  epilogue gelu_bias
//     (a tanh GELU is not the epilogue's: it stays a launch)
//   sum_to of dy to a vector that only accumulates, and a later
//     matmul_weight_grad of the same dy, not transposed, that only
//     accumulates                                   epilogue bias_grad
// With `bias-only` (the CUDA target) only the first.
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/FuseEpilogues.h"
#include "compiler/Passes.h"
#include "dialects/exec/ExecDialect.h"
#include "dialects/graph/GraphOps.h"

namespace strata {
#define GEN_PASS_DEF_FUSEEPILOGUES
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::graph;
using namespace strata::epilogues;

namespace strata::epilogues {

// The shapes, as FuseEpilogues.h states them.
AddOp biasAddOf(MatmulOp matmul) {
  if (!matmul.getResult().hasOneUse())
    return {};
  auto add = dyn_cast<AddOp>(*matmul.getResult().getUsers().begin());
  if (!add || add.getLhs() != matmul.getResult())
    return {};
  auto bias = cast<RankedTensorType>(add.getRhs().getType());
  return bias.getRank() == 1 &&
                 bias.getDimSize(0) == matmul.getType().getShape().back()
             ? add
             : AddOp();
}

GeluOp exactGeluOf(AddOp add) {
  for (Operation *user : add.getResult().getUsers())
    if (auto gelu = dyn_cast<GeluOp>(user); gelu && !gelu.getTanh())
      return gelu;
  return {};
}

/// Whether `grad`'s only use accumulates it into a parameter.
static bool accumulatesOnly(Value grad) {
  return grad.hasOneUse() && isa<AccumulateGradOp>(*grad.getUsers().begin());
}

MatmulWeightGradOp weightGradBeside(SumToOp sum) {
  auto type = sum.getType();
  if (type.getRank() != 1 || !accumulatesOnly(sum.getResult()))
    return {};
  for (Operation *user : sum.getInput().getUsers()) {
    auto wgrad = dyn_cast<MatmulWeightGradOp>(user);
    if (wgrad && wgrad.getGrad() == sum.getInput() &&
        !wgrad.getTransposeResult() && wgrad->getBlock() == sum->getBlock() &&
        sum->isBeforeInBlock(wgrad) && accumulatesOnly(wgrad.getResult()) &&
        wgrad.getGrad().getType().getShape().back() == type.getDimSize(0))
      return wgrad;
  }
  return {};
}

} // namespace strata::epilogues

namespace {

struct FuseEpiloguesPass : strata::impl::FuseEpiloguesBase<FuseEpiloguesPass> {
  using FuseEpiloguesBase::FuseEpiloguesBase;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    auto epilogue = exec::epilogue(ctx);
    auto absorbed = exec::absorbed(ctx);
    auto mark = [&](Operation *op, exec::Epilogue kind) {
      epilogue.setAttr(op, StringAttr::get(ctx, exec::stringifyEpilogue(kind)));
    };
    getOperation().walk([&](Operation *op) {
      if (auto matmul = dyn_cast<MatmulOp>(op)) {
        AddOp add = biasAddOf(matmul);
        if (!add)
          return;
        mark(matmul, exec::Epilogue::Bias);
        absorbed.setAttr(add, UnitAttr::get(ctx));
        if (GeluOp gelu = biasOnly ? GeluOp() : exactGeluOf(add)) {
          mark(matmul, exec::Epilogue::GeluBias);
          absorbed.setAttr(gelu, UnitAttr::get(ctx));
        }
      } else if (auto sum = dyn_cast<SumToOp>(op); sum && !biasOnly) {
        MatmulWeightGradOp wgrad = weightGradBeside(sum);
        if (!wgrad || epilogue.isAttrPresent(wgrad))
          return; // one bias gradient per weight gradient
        mark(wgrad, exec::Epilogue::BiasGrad);
        absorbed.setAttr(sum, UnitAttr::get(ctx));
        absorbed.setAttr(*sum.getResult().getUsers().begin(),
                         UnitAttr::get(ctx));
      }
    });
  }
};

} // namespace
