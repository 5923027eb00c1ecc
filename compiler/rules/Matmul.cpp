//===- Matmul.cpp - matrix products and their weight gradients ------------===//
//
// Gradient of y = x · w (w transposed with `transpose_b`):
//   dx = dy · wᵀ   a matmul with the transpose flipped
//   dw = xᵀ · dy   graph.matmul_weight_grad, summed over every row of x
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult matmulGradient(MatmulOp matmul, GradientBuilder &g,
                             ArrayRef<Value> dys) {
  OpBuilder &b = g.builder();
  Location loc = matmul.getLoc();
  Value dy = dys.front();
  bool transposeB = matmul.getTransposeB();
  g.contribute(matmul.getLhs(),
               MatmulOp::create(b, loc, matmul.getLhs().getType(), dy,
                                matmul.getRhs(),
                                transposeB ? UnitAttr() : b.getUnitAttr()),
               loc);
  g.contribute(matmul.getRhs(),
               MatmulWeightGradOp::create(
                   b, loc, matmul.getRhs().getType(), matmul.getLhs(), dy,
                   transposeB ? b.getUnitAttr() : UnitAttr()),
               loc);
  return success();
}

} // namespace

void OpRules<MatmulOp>::attach(MLIRContext &context) {
  attachGradient<MatmulOp, matmulGradient>(context);
}
// Backward only: no gradient of its own.
void OpRules<MatmulWeightGradOp>::attach(MLIRContext &) {}

} // namespace strata
