// The loss's gradient computed with the loss: autodiff's seed is a
// constant, so the gradient moves to the forward's place as one op.
// RUN: strata-opt %s --split-input-file --strata-fuse-loss | FileCheck %s

// The whole loss: one cross_entropy_with_grad where the loss was, the seed
// cloned before it as a forward value (no graph.backward_layer), the gradient's
// users reading its second result; the backward's seed and ops gone.
// CHECK-LABEL: func.func @microbatch
// CHECK-NEXT: %[[SEED:.*]] = graph.constant 2.500000e-01 : tensor<f32>
// CHECK-NEXT: %[[LOSS:.*]], %[[DL:.*]] = graph.cross_entropy_with_grad %arg0, %arg1, %[[SEED]] {vocab_size = 30 : i64} : (tensor<2x4x32xf32>, tensor<2x4xi32>, tensor<f32>) -> (tensor<f32>, tensor<2x4x32xf32>)
// CHECK-NEXT: graph.matmul %[[DL]], %arg2 {graph.backward_layer = 1 : i64}
// CHECK-NEXT: return %[[LOSS]]
func.func @microbatch(%l: tensor<2x4x32xf32>, %t: tensor<2x4xi32>, %w: tensor<32x8xf32>) -> tensor<f32> {
  %loss = graph.cross_entropy %l, %t {vocab_size = 30 : i64} : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  %seed = graph.constant 2.500000e-01 {graph.backward_layer = 1 : i64} : tensor<f32>
  %dl = graph.cross_entropy_grad %l, %t, %seed {graph.backward_layer = 1 : i64, vocab_size = 30 : i64} : (tensor<2x4x32xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x32xf32>
  %dx = graph.matmul %dl, %w {graph.backward_layer = 1 : i64} : (tensor<2x4x32xf32>, tensor<32x8xf32>) -> tensor<2x4x8xf32>
  return %loss : tensor<f32>
}

// -----

// The vocabulary-parallel loss: the loss from the statistics and the
// gradient of this rank's columns, one op that keeps dist.vocab_parallel
// (the lowering gives it the rank's vocab_offset).
// CHECK-LABEL: func.func @microbatch
// CHECK-NEXT: %[[SEED:.*]] = graph.constant 5.000000e-01 : tensor<f32>
// CHECK-NEXT: %[[LOSS:.*]], %[[DL:.*]] = graph.cross_entropy_with_grad_from_stats %arg0, %arg1, %arg2, %arg3, %arg4, %[[SEED]] {dist.vocab_parallel, vocab_size = 32 : i64}
// CHECK-NOT: graph.cross_entropy_grad_from_stats
// CHECK: return %[[LOSS]], %[[DL]]
func.func @microbatch(%l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %m: tensor<2x4xf32>, %s: tensor<2x4xf32>, %g: tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4x16xf32>) {
  %loss = graph.cross_entropy_from_stats %m, %s, %g : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  %seed = graph.constant 5.000000e-01 {graph.backward_layer = 0 : i64} : tensor<f32>
  %dl = graph.cross_entropy_grad_from_stats %l, %t, %m, %s, %seed {dist.vocab_parallel, graph.backward_layer = 0 : i64, vocab_size = 32 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  return %loss, %dl : tensor<f32>, tensor<2x4x16xf32>
}

// -----

// A loss gradient that is not a constant is not known in the forward:
// both ops stay.
// CHECK-LABEL: func.func @microbatch
// CHECK-NEXT: graph.cross_entropy %arg0, %arg1
// CHECK-NEXT: graph.cross_entropy_grad %arg0, %arg1, %arg2
func.func @microbatch(%l: tensor<2x4x32xf32>, %t: tensor<2x4xi32>, %seed: tensor<f32>) -> (tensor<f32>, tensor<2x4x32xf32>) {
  %loss = graph.cross_entropy %l, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dl = graph.cross_entropy_grad %l, %t, %seed {graph.backward_layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x32xf32>
  return %loss, %dl : tensor<f32>, tensor<2x4x32xf32>
}

// -----

// Another vocabulary size is another loss: not fused.
// CHECK-LABEL: func.func @microbatch
// CHECK-NEXT: graph.cross_entropy %arg0, %arg1 {vocab_size = 30 : i64}
// CHECK: graph.cross_entropy_grad
func.func @microbatch(%l: tensor<2x4x32xf32>, %t: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x32xf32>) {
  %loss = graph.cross_entropy %l, %t {vocab_size = 30 : i64} : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  %seed = graph.constant 1.000000e+00 {graph.backward_layer = 0 : i64} : tensor<f32>
  %dl = graph.cross_entropy_grad %l, %t, %seed {graph.backward_layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x32xf32>
  return %loss, %dl : tensor<f32>, tensor<2x4x32xf32>
}
