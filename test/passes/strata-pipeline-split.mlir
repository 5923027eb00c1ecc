// The step cut into pipeline chunks: two layers, a tied embedding.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split=stages=2 | FileCheck %s
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 recompute=full" | FileCheck %s --check-prefix=FULL
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=1 layers-per-virtual-stage=1" | FileCheck %s --check-prefix=VIRTUAL
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split=stages=3 --verify-diagnostics

// CHECK: shard.grid @mesh(shape = 1x1x2x1)
// Chunk 0: the embedding and layer 0; it sends layer 1's input and keeps
// what its backward reads (the embedding output under the boundary view,
// the matmul before the gelu).
// CHECK-LABEL: func.func @forward_0() -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) attributes {dist.chunk = 0 : i64}
// CHECK: %[[X:.*]] = graph.embedding
// CHECK: %[[M0:.*]] = graph.matmul
// CHECK: %[[R0:.*]] = graph.add
// CHECK: dist.send %[[R0]] to chunk 1 channel 0 : tensor<2x4x8xf32>
// CHECK: return %[[M0]], %[[X]]
// CHECK-LABEL: func.func @backward_0(
// CHECK: %[[G:.*]] = dist.recv from chunk 1 channel 1 : tensor<2x4x8xf32>
// CHECK: graph.gelu_grad
// CHECK: graph.embedding_grad
// CHECK-NOT: dist.send
// CHECK: return
// Chunk 1: layer 1, the output layer and the loss.
// CHECK-LABEL: func.func @forward_1()
// CHECK: %[[IN:.*]] = dist.recv from chunk 0 channel 0 : tensor<2x4x8xf32>
// CHECK: graph.layer_boundary 1 %[[IN]]
// CHECK: %[[LOSS:.*]] = graph.cross_entropy
// CHECK: dist.loss %[[LOSS]] : tensor<f32>
// CHECK-LABEL: func.func @backward_1(
// CHECK: graph.cross_entropy_grad
// CHECK: dist.send %{{.*}} to chunk 0 channel 1 : tensor<2x4x8xf32>
// The tied table's two accumulators are summed; the norm spans stages.
// CHECK-LABEL: func.func @optimizer
// CHECK-NEXT: dist.tie_gradients "e" on @mesh stages = [0, 1]
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [2]
// CHECK-NOT: func.func @microbatch

// Full recomputation keeps only each layer's input: the backward runs the
// layer's forward again first.
// FULL-LABEL: func.func @forward_0() -> tensor<2x4x8xf32>
// FULL-LABEL: func.func @backward_0(%arg0: tensor<2x4x8xf32>)
// FULL: dist.recv from chunk 1
// FULL: graph.layer_boundary 0 %arg0
// FULL: graph.matmul
// FULL: graph.gelu_grad
// FULL-LABEL: func.func @forward_1() -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// FULL-NOT: graph.cross_entropy_grad
// FULL: dist.loss
// FULL-LABEL: func.func @backward_1(
// The output layer is computed again for the loss gradient.
// FULL: graph.matmul %{{.*}}, %{{.*}} {transpose_b}
// FULL: graph.cross_entropy_grad

// One stage, two chunks of one layer: the chunks pass values to themselves.
// VIRTUAL: shard.grid @mesh(shape = 1x1x1x1)
// VIRTUAL: func.func @forward_0
// VIRTUAL: dist.send %{{.*}} to chunk 1 channel 0
// VIRTUAL: func.func @forward_1
// VIRTUAL-NOT: dist.tie_gradients

// expected-error @below {{2 layers do not divide among 3 pipeline stages: choose a size that divides them, or give the first and last stages' layer counts (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers)}}
module {
func.func @model() -> tensor<f32> {
  %t = graph.input "tokens" : tensor<2x4xi32>
  %y = graph.input "labels" : tensor<2x4xi32>
  %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
  %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %b0 = graph.layer_boundary 0 %x : tensor<2x4x8xf32>
  %w0 = graph.param "w0" normal(2.000000e-02) : tensor<8x8xf32>
  %m0 = graph.matmul %b0, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g0 = graph.gelu %m0 : tensor<2x4x8xf32>
  %r0 = graph.add %b0, %g0 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %b1 = graph.layer_boundary 1 %r0 : tensor<2x4x8xf32>
  %w1 = graph.param "w1" normal(2.000000e-02) : tensor<8x8xf32>
  %m1 = graph.matmul %b1, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g1 = graph.gelu %m1 : tensor<2x4x8xf32>
  %r1 = graph.add %b1, %g1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %b2 = graph.layer_boundary 2 %r1 : tensor<2x4x8xf32>
  %l = graph.matmul %b2, %e {transpose_b} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %loss = graph.cross_entropy %l, %y : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}
