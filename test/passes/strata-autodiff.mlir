// The VJP rules, op by op.
// RUN: strata-opt %s --split-input-file --strata-autodiff=loss-scale=0.25 --verify-diagnostics | FileCheck %s

// A tied table: both uses accumulate into the one accumulator; the seed is
// the loss scale; a matmul's input gradient flips the transpose.
// CHECK-LABEL: func.func @microbatch
// CHECK: %[[LOSS:.*]] = graph.cross_entropy
// CHECK: %[[SEED:.*]] = graph.constant 2.500000e-01 {{.*}}: tensor<f32>
// CHECK: %[[DLOGITS:.*]] = graph.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED]]
// CHECK: %[[DX:.*]] = graph.matmul %[[DLOGITS]], %[[E:.*]] {{.*}}: (tensor<2x4x32xf32>, tensor<32x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[DE:.*]] = graph.matmul_weight_grad %{{.*}}, %[[DLOGITS]] {graph.backward_layer = -1 : i64, transpose_result} : (tensor<2x4x8xf32>, tensor<2x4x32xf32>) -> tensor<32x8xf32>
// CHECK: graph.accumulate_grad "e", %[[DE]]
// CHECK: %[[DTABLE:.*]] = graph.embedding_grad %[[DX]], %{{.*}} {{.*}}: (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<32x8xf32>
// CHECK: graph.accumulate_grad "e", %[[DTABLE]]
// CHECK-NOT: graph.accumulate_grad
// CHECK: return %[[LOSS]]
func.func @model() -> tensor<f32> {
  %t = graph.input "tokens" : tensor<2x4xi32>
  %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
  %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = graph.matmul %x, %e {transpose_b} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %loss = graph.cross_entropy %l, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Broadcast operands sum back to their shape; sub negates; mul multiplies
// by the other side; a value used twice sums its gradients.
// CHECK-LABEL: func.func @microbatch
// CHECK-DAG: %[[DB:.*]] = graph.sum_to %{{.*}} {{.*}}: tensor<2x4x8xf32> -> tensor<8xf32>
// CHECK-DAG: graph.accumulate_grad "b", %[[DB]]
// CHECK-DAG: %[[NEG:.*]] = graph.scale %{{.*}}, -1.000000e+00 {{.*}}: tensor<4x8xf32>
// CHECK-DAG: graph.accumulate_grad "c", %[[NEG]]
// CHECK-DAG: graph.mul %{{.*}}, %{{.*}} {{.*}}: tensor<2x4x8xf32>, tensor<2x4x8xf32>
// CHECK-DAG: graph.gelu_grad
// CHECK-DAG: graph.silu_grad
// CHECK-DAG: graph.add %{{.*}}, %{{.*}} {{.*}}: tensor<2x4x8xf32>, tensor<2x4x8xf32>
func.func @model(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %b = graph.param "b" zeros : tensor<8xf32>
  %c = graph.param "c" zeros : tensor<4x8xf32>
  %y = graph.add %x, %b : tensor<2x4x8xf32>, tensor<8xf32>
  %z = graph.sub %y, %c : tensor<2x4x8xf32>, tensor<4x8xf32>
  %g = graph.gelu %z : tensor<2x4x8xf32>
  %s = graph.silu %z : tensor<2x4x8xf32>
  %m = graph.mul %g, %s : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %loss = graph.cross_entropy %m, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Norms, reshape, transpose (by the inverse permutation), rope (by the
// inverse rotation), grouped-query attention and layer boundaries.
// The backward reads the forward's output and its row log-sum-exp.
// CHECK-LABEL: func.func @microbatch
// CHECK: %[[O:[a-z0-9_]+]], %[[LSE:[a-z0-9_]+]] = graph.attention
// CHECK: graph.transpose %{{.*}} [0, 2, 3, 1] {{.*}}: tensor<1x4x4x2xf32> -> tensor<1x4x2x4xf32>
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = graph.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[O]], %[[LSE]], %{{.*}} {causal, graph.backward_layer = 0 : i64}
// CHECK: graph.rope %{{.*}} {graph.backward_layer = 0 : i64, inverse} : tensor<1x4x2x4xf32>
// CHECK: %{{.*}}, %[[DW:.*]] = graph.rms_norm_grad
// CHECK: graph.accumulate_grad "g", %[[DW]]
// CHECK: %{{.*}}, %[[LW:.*]], %[[LB:.*]] = graph.layer_norm_grad
// CHECK: graph.accumulate_grad "w", %[[LW]]
// CHECK: graph.accumulate_grad "b", %[[LB]]
func.func @model(%x: tensor<1x4x8xf32>, %t: tensor<1x4xi32>) -> tensor<f32> {
  %w = graph.param "w" ones : tensor<8xf32>
  %b = graph.param "b" zeros : tensor<8xf32>
  %g = graph.param "g" ones : tensor<8xf32>
  %b0 = graph.layer_boundary 0 %x : tensor<1x4x8xf32>
  %n = graph.layer_norm %b0, %w, %b {epsilon = 1.0e-05 : f64} : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %r = graph.rms_norm %n, %g {epsilon = 1.0e-05 : f64} : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %q = graph.reshape %r : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %qr = graph.rope %q : tensor<1x4x2x4xf32>
  %kv = graph.reshape %r : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %a, %a_lse = graph.attention %qr, %kv, %kv {causal} : (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>) -> (tensor<1x4x2x4xf32>, tensor<1x2x4xf32>)
  %tr = graph.transpose %a [0, 3, 1, 2] : tensor<1x4x2x4xf32> -> tensor<1x4x4x2xf32>
  %flat = graph.reshape %tr : tensor<1x4x4x2xf32> -> tensor<1x4x8xf32>
  %b1 = graph.layer_boundary 1 %flat : tensor<1x4x8xf32>
  %loss = graph.cross_entropy %b1, %t : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// What does not reach the loss gets no gradient.
// CHECK-LABEL: func.func @microbatch
// CHECK-NOT: graph.accumulate_grad "unused"
// CHECK-NOT: graph.gelu_grad
func.func @model(%x: tensor<2x8xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %u = graph.param "unused" ones : tensor<8xf32>
  %dead = graph.gelu %u : tensor<8xf32>
  %loss = graph.cross_entropy %x, %t : (tensor<2x8xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Only a model's forward ops have gradient rules: a backward op in @model
// is refused by name.
func.func @model(%x: tensor<2x8xf32>, %d: tensor<2x8xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  // expected-error @below {{'graph.gelu_grad' op has no gradient: only a model's forward ops are differentiated, not the training step's own}}
  %g = graph.gelu_grad %x, %d : tensor<2x8xf32>
  %loss = graph.cross_entropy %g, %t : (tensor<2x8xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
