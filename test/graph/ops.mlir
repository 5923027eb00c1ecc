// Every graph op prints and parses back to itself.
// RUN: strata-opt %s | strata-opt | FileCheck %s
// RUN: strata-opt %s --mlir-print-op-generic | strata-opt | FileCheck %s

// CHECK-LABEL: func.func @sources
func.func @sources() -> (tensor<2x16xi32>, tensor<8x4xf32>, tensor<4xf32>, tensor<4xbf16>) {
  // CHECK: graph.input "tokens" : tensor<2x16xi32>
  %tokens = graph.input "tokens" : tensor<2x16xi32>
  // CHECK: graph.param "w" normal(2.000000e-02) : tensor<8x4xf32>
  %w = graph.param "w" normal(2.000000e-02) : tensor<8x4xf32>
  // CHECK: graph.param "g" ones : tensor<4xf32>
  %g = graph.param "g" ones : tensor<4xf32>
  // CHECK: graph.param "b" zeros : tensor<4xbf16>
  %b = graph.param "b" zeros : tensor<4xbf16>
  return %tokens, %w, %g, %b : tensor<2x16xi32>, tensor<8x4xf32>, tensor<4xf32>, tensor<4xbf16>
}

// CHECK-LABEL: func.func @compute
func.func @compute(%tokens: tensor<2x16xi32>, %table: tensor<32x8xf32>,
                   %w: tensor<8x24xf32>, %v: tensor<8xf32>,
                   %pos: tensor<16x8xf32>) -> tensor<f32> {
  // CHECK: graph.embedding %{{.*}}, %{{.*}} : (tensor<32x8xf32>, tensor<2x16xi32>) -> tensor<2x16x8xf32>
  %x = graph.embedding %table, %tokens : (tensor<32x8xf32>, tensor<2x16xi32>) -> tensor<2x16x8xf32>
  // CHECK: graph.add %{{.*}}, %{{.*}} : tensor<2x16x8xf32>, tensor<16x8xf32>
  %x1 = graph.add %x, %pos : tensor<2x16x8xf32>, tensor<16x8xf32>
  // CHECK: graph.sub %{{.*}}, %{{.*}} : tensor<2x16x8xf32>, tensor<8xf32>
  %x2 = graph.sub %x1, %v : tensor<2x16x8xf32>, tensor<8xf32>
  // CHECK: graph.mul %{{.*}}, %{{.*}} : tensor<2x16x8xf32>, tensor<2x16x8xf32>
  %x3 = graph.mul %x2, %x1 : tensor<2x16x8xf32>, tensor<2x16x8xf32>
  // CHECK: graph.layer_norm {{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<2x16x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x16x8xf32>
  %n = graph.layer_norm %x3, %v, %v {epsilon = 1.000000e-05 : f64} : (tensor<2x16x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x16x8xf32>
  // CHECK: graph.rms_norm {{.*}} {epsilon = 1.000000e-04 : f64} : (tensor<2x16x8xf32>, tensor<8xf32>) -> tensor<2x16x8xf32>
  %r = graph.rms_norm %n, %v {epsilon = 1.000000e-04 : f64} : (tensor<2x16x8xf32>, tensor<8xf32>) -> tensor<2x16x8xf32>
  // CHECK: graph.matmul {{.*}} : (tensor<2x16x8xf32>, tensor<8x24xf32>) -> tensor<2x16x24xf32>
  %qkv = graph.matmul %r, %w : (tensor<2x16x8xf32>, tensor<8x24xf32>) -> tensor<2x16x24xf32>
  // CHECK: graph.gelu %{{.*}} : tensor<2x16x24xf32>
  %gl = graph.gelu %qkv : tensor<2x16x24xf32>
  // CHECK: graph.gelu %{{.*}} tanh : tensor<2x16x24xf32>
  %gt = graph.gelu %qkv tanh : tensor<2x16x24xf32>
  // CHECK: graph.silu %{{.*}} : tensor<2x16x24xf32>
  %sl = graph.silu %gl : tensor<2x16x24xf32>
  // CHECK: graph.reshape %{{.*}} : tensor<2x16x24xf32> -> tensor<2x16x6x4xf32>
  %heads = graph.reshape %sl : tensor<2x16x24xf32> -> tensor<2x16x6x4xf32>
  // CHECK: graph.transpose %{{.*}} [0, 2, 1, 3] : tensor<2x16x6x4xf32> -> tensor<2x6x16x4xf32>
  %t = graph.transpose %heads [0, 2, 1, 3] : tensor<2x16x6x4xf32> -> tensor<2x6x16x4xf32>
  // CHECK: graph.transpose %{{.*}} [0, 2, 1, 3] : tensor<2x6x16x4xf32> -> tensor<2x16x6x4xf32>
  %q = graph.transpose %t [0, 2, 1, 3] : tensor<2x6x16x4xf32> -> tensor<2x16x6x4xf32>
  // CHECK: graph.rope %{{.*}} : tensor<2x16x6x4xf32>
  %qr = graph.rope %q : tensor<2x16x6x4xf32>
  // CHECK: graph.rope %{{.*}} {base = 5.000000e+05 : f64} : tensor<2x16x6x4xf32>
  %qr2 = graph.rope %qr {base = 5.000000e+05 : f64} : tensor<2x16x6x4xf32>
  %kv = graph.reshape %qkv : tensor<2x16x24xf32> -> tensor<2x16x6x4xf32>
  // CHECK: graph.attention {{.*}} {causal} : (tensor<2x16x6x4xf32>, tensor<2x16x6x4xf32>, tensor<2x16x6x4xf32>) -> (tensor<2x16x6x4xf32>, tensor<2x6x16xf32>)
  %a, %a_lse = graph.attention %qr2, %kv, %kv {causal} : (tensor<2x16x6x4xf32>, tensor<2x16x6x4xf32>, tensor<2x16x6x4xf32>) -> (tensor<2x16x6x4xf32>, tensor<2x6x16xf32>)
  %a2 = graph.reshape %a : tensor<2x16x6x4xf32> -> tensor<2x16x24xf32>
  %h = graph.matmul %a2, %w {transpose_b} : (tensor<2x16x24xf32>, tensor<8x24xf32>) -> tensor<2x16x8xf32>
  // CHECK: graph.layer_boundary 0 %{{.*}}, %{{.*}} : tensor<2x16x8xf32>, tensor<2x16x8xf32>
  %b:2 = graph.layer_boundary 0 %h, %x : tensor<2x16x8xf32>, tensor<2x16x8xf32>
  // CHECK: graph.matmul {{.*}} {transpose_b} : (tensor<2x16x8xf32>, tensor<32x8xf32>) -> tensor<2x16x32xf32>
  %logits = graph.matmul %b#0, %table {transpose_b} : (tensor<2x16x8xf32>, tensor<32x8xf32>) -> tensor<2x16x32xf32>
  // CHECK: graph.cross_entropy {{.*}} : (tensor<2x16x32xf32>, tensor<2x16xi32>) -> tensor<f32>
  %loss = graph.cross_entropy %logits, %tokens : (tensor<2x16x32xf32>, tensor<2x16xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Grouped-query heads: 6 query heads read 2 key/value heads.
// CHECK-LABEL: func.func @grouped_query
func.func @grouped_query(%q: tensor<1x8x6x4xbf16>, %kv: tensor<1x8x2x4xbf16>) -> tensor<1x8x6x4xbf16> {
  // CHECK: graph.attention {{.*}} : (tensor<1x8x6x4xbf16>, tensor<1x8x2x4xbf16>, tensor<1x8x2x4xbf16>) -> (tensor<1x8x6x4xbf16>, tensor<1x6x8xf32>)
  %a, %a_lse = graph.attention %q, %kv, %kv : (tensor<1x8x6x4xbf16>, tensor<1x8x2x4xbf16>, tensor<1x8x2x4xbf16>) -> (tensor<1x8x6x4xbf16>, tensor<1x6x8xf32>)
  return %a : tensor<1x8x6x4xbf16>
}
