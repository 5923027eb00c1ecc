//===- Autodiff.cpp - reverse-mode gradients of the model -----------------===//
//
// Turns @model (forward and loss) into @microbatch: the same forward, then
// the backward pass, walking the forward ops in reverse and applying each
// op's vector-Jacobian product: its graph::Differentiable rule, written in
// the file of its family under compiler/rules/. A parameter's gradient
// contributions are not summed here: each becomes one graph.accumulate_grad
// into the parameter's fp32 accumulator (rules/GradientBuilder.h).
//
// Each backward op carries `graph.backward_layer`: the layer of the forward op
// it differentiates (-1 before the first layer boundary, L after the last), so
// that pipeline stages can take the backward of the layers they hold.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/StepFunctions.h"
#include "compiler/rules/GradientBuilder.h"
#include "dialects/graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace strata {
#define GEN_PASS_DEF_AUTODIFF
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata::graph;

namespace {

struct AutodiffPass : strata::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>("model");
    if (!func) {
      getOperation().emitError() << "no @model function to differentiate";
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    Value loss = ret.getOperand(0);
    SmallVector<Operation *> forward;
    for (Operation &op : func.getBody().front().without_terminator())
      forward.push_back(&op);

    // The layer of each forward op: by its place between the boundaries.
    llvm::DenseMap<Operation *, int64_t> layerOf;
    int64_t layer = -1;
    for (Operation *op : forward) {
      if (auto boundary = dyn_cast<LayerBoundaryOp>(op))
        layer = static_cast<int64_t>(boundary.getIndex());
      layerOf[op] = layer;
    }

    OpBuilder b(ret);
    strata::GradientBuilder gradients(b);
    auto tagSince = [&](Operation *last, int64_t layer) {
      for (Operation *op = last ? last->getNextNode()
                                : &ret->getBlock()->front();
           op != ret; op = op->getNextNode())
        backwardLayer(b.getContext()).setAttr(op, b.getI64IntegerAttr(layer));
    };
    // The seed: the gradient of the loss itself, 1/microbatches when
    // microbatch gradients are summed into one step.
    Operation *last = ret->getPrevNode();
    gradients.contribute(loss,
                         ConstantOp::create(b, ret.getLoc(), loss.getType(),
                                            b.getF64FloatAttr(lossScale)),
                         ret.getLoc());
    tagSince(last, layer);
    for (Operation *op : llvm::reverse(forward)) {
      last = ret->getPrevNode();
      if (failed(gradients.differentiate(op)))
        return signalPassFailure();
      tagSince(last, layerOf[op]);
    }
    func.setSymName(strata::step::kMicrobatch);
  }
};

} // namespace
