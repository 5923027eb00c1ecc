//===- ModelStats.cpp - sizes a user wants before running -----------------===//
#include "compiler/ModelStats.h"
#include "dialects/graph/GraphOps.h"

using namespace mlir;

namespace strata {

ModelStats computeModelStats(ModuleOp module) {
  ModelStats stats;
  if (auto name = module->getAttrOfType<StringAttr>("strata.model"))
    stats.name = name.str();
  int64_t boundaries = 0;
  bool exactGelu = false, tanhGelu = false;
  module.walk([&](Operation *op) {
    if (auto gelu = dyn_cast<graph::GeluOp>(op)) {
      (gelu.getTanh() ? tanhGelu : exactGelu) = true;
    } else if (auto param = dyn_cast<graph::ParamOp>(op)) {
      stats.parameters += param.getType().getNumElements();
    } else if (isa<graph::LayerBoundaryOp>(op)) {
      ++boundaries;
    } else if (auto loss = dyn_cast<graph::CrossEntropyOp>(op)) {
      stats.tokens += loss.getLabels().getType().getNumElements();
      stats.seqLength = loss.getLabels().getType().getShape().back();
      stats.vocabSize = loss.getLogits().getType().getShape().back();
    } else if (auto matmul = dyn_cast<graph::MatmulOp>(op)) {
      // lhs [..., k] holds rows·k elements; the result [..., n].
      int64_t lhs = matmul.getLhs().getType().getNumElements();
      int64_t n = matmul.getType().getShape().back();
      stats.forwardFlops += 2 * lhs * n;
      for (Operation *user : matmul->getUsers())
        if (auto loss = dyn_cast<graph::CrossEntropyOp>(user);
            loss && loss.getLogits() == matmul.getResult()) {
          stats.logitFlops += 2 * lhs * n;
          stats.hidden = matmul.getLhs().getType().getShape().back();
        }
    } else if (auto attention = dyn_cast<graph::AttentionOp>(op)) {
      // scores q·kᵀ and context p·v: 2·s·s·d each, per batch and head.
      int64_t query = attention.getQuery().getType().getNumElements();
      int64_t keys = attention.getKey().getType().getDimSize(1);
      stats.forwardFlops += 4 * query * keys;
      stats.attentionFlops += 4 * query * keys;
    }
  });
  stats.layers = boundaries > 0 ? boundaries - 1 : 0;
  stats.gelu = exactGelu && tanhGelu ? "exact,tanh"
               : exactGelu           ? "exact"
               : tanhGelu            ? "tanh"
                                     : "";
  return stats;
}

} // namespace strata
