// The epilogue pass marks what a gemm does after its product, each a shape
// the epilogue computes exactly: a matmul's bias add (a vector of the
// product's last dimension, the product's only use) as `bias`; an erf GELU
// of that sum as `gelu_bias` (a tanh GELU stays its own launch); a bias
// gradient (a sum_to of dy that only accumulates) beside a later weight
// gradient of the same dy (not transposed, only accumulating) as
// `bias_grad`. The gemm's op gets exec.epilogue, what it absorbs
// exec.absorbed. With bias-only (the CUDA target) only the bias add.
// RUN: strata-opt %s --split-input-file --strata-fuse-epilogues | FileCheck %s
// RUN: strata-opt %s --split-input-file --strata-fuse-epilogues=bias-only | FileCheck %s --check-prefix=BIAS-ONLY

// A bias add, then an erf GELU of the biased product.
// CHECK-LABEL: func.func @bias_gelu
// CHECK: %[[P:.*]] = graph.matmul %{{.*}}, %{{.*}} {exec.epilogue = "gelu_bias"}
// CHECK-NEXT: %[[A:.*]] = graph.add %[[P]], %{{.*}} {exec.absorbed}
// CHECK-NEXT: graph.gelu %[[A]] {exec.absorbed}
// BIAS-ONLY-LABEL: func.func @bias_gelu
// BIAS-ONLY: graph.matmul %{{.*}}, %{{.*}} {exec.epilogue = "bias"}
// BIAS-ONLY-NEXT: graph.add %{{.*}}, %{{.*}} {exec.absorbed}
// BIAS-ONLY-NEXT: graph.gelu %{{.*}} : tensor<2x4x16xf32>
func.func @bias_gelu(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %p = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %a = graph.add %p, %b : tensor<2x4x16xf32>, tensor<16xf32>
  %h = graph.gelu %a : tensor<2x4x16xf32>
  return %h : tensor<2x4x16xf32>
}

// -----

// A tanh GELU is not the epilogue's: only the bias is absorbed.
// CHECK-LABEL: func.func @tanh_gelu
// CHECK: graph.matmul %{{.*}}, %{{.*}} {exec.epilogue = "bias"}
// CHECK-NEXT: graph.add %{{.*}}, %{{.*}} {exec.absorbed}
// CHECK-NEXT: graph.gelu %{{.*}} tanh : tensor<2x4x16xf32>
func.func @tanh_gelu(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %p = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %a = graph.add %p, %b : tensor<2x4x16xf32>, tensor<16xf32>
  %h = graph.gelu %a tanh : tensor<2x4x16xf32>
  return %h : tensor<2x4x16xf32>
}

// -----

// Not a bias: a residual add of a whole tensor, and a product with a
// second use (the epilogue would hide it).
// CHECK-LABEL: func.func @not_a_bias
// CHECK-NOT: exec.
// CHECK: return
func.func @not_a_bias(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %p = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r = graph.add %p, %x : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %q = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %a = graph.add %q, %b : tensor<2x4x8xf32>, tensor<8xf32>
  %s = graph.add %a, %q : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  return %r, %s : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// A bias gradient beside the weight gradient of the same dy: summed in the
// weight gradient's epilogue, its accumulation with it.
// CHECK-LABEL: func.func @bias_grad
// CHECK: %[[DB:.*]] = graph.sum_to %{{.*}} {exec.absorbed}
// CHECK-NEXT: graph.accumulate_grad "b", %[[DB]] {exec.absorbed}
// CHECK-NEXT: %[[DW:.*]] = graph.matmul_weight_grad %{{.*}}, %{{.*}} {exec.epilogue = "bias_grad"}
// CHECK-NEXT: graph.accumulate_grad "w", %[[DW]] : tensor<8x16xf32>
// BIAS-ONLY-LABEL: func.func @bias_grad
// BIAS-ONLY-NOT: exec.
// BIAS-ONLY: return
func.func @bias_grad(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x16xf32>) {
  %db = graph.sum_to %dy : tensor<2x4x16xf32> -> tensor<16xf32>
  graph.accumulate_grad "b", %db : tensor<16xf32>
  %dw = graph.matmul_weight_grad %x, %dy : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<8x16xf32>
  graph.accumulate_grad "w", %dw : tensor<8x16xf32>
  return
}

// -----

// Not beside: a weight gradient before the sum (its gemm has run), one of
// a transposed result, one that does not only accumulate, and a bias
// gradient used twice.
// CHECK-LABEL: func.func @not_beside
// CHECK-NOT: exec.
// CHECK: return
func.func @not_beside(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x16xf32>, %dz: tensor<2x4x16xf32>, %du: tensor<2x4x16xf32>, %dv: tensor<2x4x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  %dw0 = graph.matmul_weight_grad %x, %dy : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<8x16xf32>
  graph.accumulate_grad "w0", %dw0 : tensor<8x16xf32>
  %db0 = graph.sum_to %dy : tensor<2x4x16xf32> -> tensor<16xf32>
  graph.accumulate_grad "b0", %db0 : tensor<16xf32>
  %db1 = graph.sum_to %dz : tensor<2x4x16xf32> -> tensor<16xf32>
  graph.accumulate_grad "b1", %db1 : tensor<16xf32>
  %dw1 = graph.matmul_weight_grad %x, %dz {transpose_result} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<16x8xf32>
  graph.accumulate_grad "w1", %dw1 : tensor<16x8xf32>
  %db2 = graph.sum_to %du : tensor<2x4x16xf32> -> tensor<16xf32>
  graph.accumulate_grad "b2", %db2 : tensor<16xf32>
  %dw2 = graph.matmul_weight_grad %x, %du : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %db3 = graph.sum_to %dv : tensor<2x4x16xf32> -> tensor<16xf32>
  graph.accumulate_grad "b3", %db3 : tensor<16xf32>
  %dw3 = graph.matmul_weight_grad %x, %dv : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<8x16xf32>
  graph.accumulate_grad "w3", %dw3 : tensor<8x16xf32>
  return %dw2, %db3 : tensor<8x16xf32>, tensor<16xf32>
}
