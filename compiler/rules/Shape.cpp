//===- Shape.cpp - reshape, transpose and sums to a broadcast shape -------===//
//
// Gradients: a reshape's is the gradient reshaped back; a transpose's is
// the gradient transposed by the inverse permutation.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult reshapeGradient(ReshapeOp reshape, GradientBuilder &g,
                              ArrayRef<Value> dys) {
  g.contribute(reshape.getInput(),
               ReshapeOp::create(g.builder(), reshape.getLoc(),
                                 reshape.getInput().getType(), dys.front()),
               reshape.getLoc());
  return success();
}

LogicalResult transposeGradient(TransposeOp transpose, GradientBuilder &g,
                                ArrayRef<Value> dys) {
  ArrayRef<int64_t> perm = transpose.getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  g.contribute(transpose.getInput(),
               TransposeOp::create(g.builder(), transpose.getLoc(),
                                   transpose.getInput().getType(), dys.front(),
                                   g.builder().getDenseI64ArrayAttr(inverse)),
               transpose.getLoc());
  return success();
}

} // namespace

void OpRules<ReshapeOp>::attach(MLIRContext &context) {
  attachGradient<ReshapeOp, reshapeGradient>(context);
}
void OpRules<TransposeOp>::attach(MLIRContext &context) {
  attachGradient<TransposeOp, transposeGradient>(context);
}
// Backward only (a broadcast operand's gradient): no gradient of its own.
void OpRules<SumToOp>::attach(MLIRContext &) {}

} // namespace strata
