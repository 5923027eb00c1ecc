//===- Embedding.cpp - table lookups and their gradient -------------------===//
//
// Gradient: the rows looked up receive the output's gradient, scattered
// and summed by token id (graph.embedding_grad); token ids have none.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult embeddingGradient(EmbeddingOp embedding, GradientBuilder &g,
                                ArrayRef<Value> dys) {
  Location loc = embedding.getLoc();
  g.contribute(embedding.getTable(),
               EmbeddingGradOp::create(g.builder(), loc,
                                       embedding.getTable().getType(),
                                       dys.front(), embedding.getIds()),
               loc);
  return success();
}

} // namespace

void OpRules<EmbeddingOp>::attach(MLIRContext &context) {
  attachGradient<EmbeddingOp, embeddingGradient>(context);
}
// Backward only: no gradient of its own.
void OpRules<EmbeddingGradOp>::attach(MLIRContext &) {}

} // namespace strata
