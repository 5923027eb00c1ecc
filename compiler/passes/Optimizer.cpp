//===- Optimizer.cpp - the AdamW step as a graph function -----------------===//
//
// Adds @optimizer: read every parameter's accumulated gradient, take the
// global gradient norm over the whole model (never per parameter or rank),
// derive the clipping coefficient, and apply one AdamW update per parameter.
// It returns the norm for the log line.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/StepFunctions.h"
#include "dialects/graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace strata {
#define GEN_PASS_DEF_OPTIMIZER
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata::graph;

namespace {

struct OptimizerPass : strata::impl::OptimizerBase<OptimizerPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto microbatch =
        module.lookupSymbol<func::FuncOp>(strata::step::kMicrobatch);
    if (!microbatch) {
      module.emitError() << "no @microbatch function: run --strata-autodiff "
                            "first";
      return signalPassFailure();
    }
    if (module.lookupSymbol(strata::step::kOptimizer)) {
      module.emitError() << "the module already has an @optimizer";
      return signalPassFailure();
    }

    // Parameters in program order, each once.
    SmallVector<ParamOp> params;
    llvm::StringSet<> seen;
    microbatch.walk([&](ParamOp param) {
      if (seen.insert(param.getName()).second)
        params.push_back(param);
    });

    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = microbatch.getLoc();
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    auto func = func::FuncOp::create(b, loc, strata::step::kOptimizer,
                                     b.getFunctionType({}, {scalar}));
    b.setInsertionPointToEnd(func.addEntryBlock());

    SmallVector<Value> grads;
    Value total;
    for (ParamOp param : params) {
      Value grad = GradOp::create(b, param.getLoc(), param.getType(),
                                  param.getNameAttr());
      grads.push_back(grad);
      Value squares = SumSquaresOp::create(b, param.getLoc(), grad);
      total = total ? AddOp::create(b, loc, scalar, total, squares).getResult()
                    : squares;
    }
    auto clip = ClipCoefficientOp::create(b, loc, total);
    for (auto [param, grad] : llvm::zip(params, grads)) {
      // Megatron decays matrices only: no decay on biases and norm weights.
      bool decay = param.getType().getRank() >= 2;
      AdamWOp::create(b, param.getLoc(), param.getNameAttr(), grad,
                      clip.getCoefficient(),
                      decay ? b.getUnitAttr() : UnitAttr());
    }
    func::ReturnOp::create(b, loc, clip.getNorm());
  }
};

} // namespace
