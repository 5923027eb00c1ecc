// The optimizer function: the norm over all gradients, then AdamW per
// parameter, decaying matrices only.
// RUN: strata-opt %s --strata-optimizer | FileCheck %s

// CHECK-LABEL: func.func @optimizer() -> tensor<f32>
// CHECK: %[[GW:.*]] = graph.grad "w" : tensor<4x4xf32>
// CHECK: %[[SW:.*]] = graph.sum_squares %[[GW]]
// CHECK: %[[GB:.*]] = graph.grad "b" : tensor<4xf32>
// CHECK: %[[SB:.*]] = graph.sum_squares %[[GB]]
// CHECK: %[[SUM:.*]] = graph.add %[[SW]], %[[SB]]
// CHECK: %[[NORM:.*]], %[[COEF:.*]] = graph.clip_coefficient %[[SUM]]
// CHECK: graph.adamw "w", %[[GW]], %[[COEF]] {weight_decay}
// CHECK: graph.adamw "b", %[[GB]], %[[COEF]] :
// CHECK: return %[[NORM]]
func.func @microbatch(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %w = graph.param "w" normal(2.000000e-02) : tensor<4x4xf32>
  %b = graph.param "b" zeros : tensor<4xf32>
  %y = graph.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %z = graph.add %y, %b : tensor<2x4xf32>, tensor<4xf32>
  %loss = graph.cross_entropy %z, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
