// A linear layer's bias and the GELU after it become the gemm's epilogue,
// and the bias's gradient the epilogue of the weight gradient's gemm: the
// instructions a GPU runs as cuBLASLt's BIAS, GELU_AUX_BIAS and BGRADB.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-schedule=microbatches=1 --strata-fuse-epilogues --strata-layout-optimizer-state --strata-lower-to-exec | FileCheck %s
// With --strata-fuse-epilogues=bias-only (the CUDA target: cuBLASLt's GELU is the tanh
// form and its bias gradient overwrites), only the bias adds stay in the
// gemms; the GELU and the bias gradients are launches of their own.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-schedule=microbatches=1 --strata-fuse-epilogues=bias-only --strata-layout-optimizer-state --strata-lower-to-exec | FileCheck %s --check-prefix=BIAS-ONLY --implicit-check-not=gelu_bias --implicit-check-not=bias_grad

// Forward: h = gelu(x·w1 + b1) in one gemm (keeping x·w1 + b1, which the
// GELU's backward reads); y = h·w2 + b2 in another.
// CHECK: exec.program @microbatch microbatch {
// CHECK: exec.gemm @[[X:[a-z0-9"@:]+]], @"param:w1" -> @[[H:t[0-9]+]] epilogue gelu_bias bias @"param:b1" aux @[[PRE:t[0-9]+]] {k = 8 : i64, lda = 8 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64}
// CHECK-NEXT: exec.gemm @[[H]], @"param:w2" -> @{{t[0-9]+}} epilogue bias bias @"param:b2" {k = 16 : i64, lda = 16 : i64, ldb = 8 : i64, ldd = 8 : i64, m = 8 : i64, n = 8 : i64}
// No separate add or gelu remains.
// CHECK-NOT: exec.launch "add"
// CHECK-NOT: exec.launch "gelu_fwd"
// Backward: each weight gradient's gemm sums its bias's gradient into the
// bias's accumulator (beta 1 for both); the GELU's backward reads the
// kept pre-activation.
// CHECK: exec.gemm @[[H]], @{{t[0-9]+}} -> @"grad:w2" epilogue bias_grad bias @"grad:b2" {beta = 1.000000e+00 : f32
// CHECK: exec.launch "gelu_bwd" (@[[PRE]], @{{t[0-9]+}})
// CHECK: exec.gemm @{{.*}} -> @"grad:w1" epilogue bias_grad bias @"grad:b1" {beta = 1.000000e+00 : f32
// CHECK-NOT: exec.launch "sum_to"
// CHECK: exec.program @optimizer

// BIAS-ONLY: exec.program @microbatch microbatch {
// BIAS-ONLY: exec.gemm @{{.*}}, @"param:w1" -> @[[PRE:t[0-9]+]] epilogue bias bias @"param:b1" {k = 8 : i64
// BIAS-ONLY-NEXT: exec.launch "gelu_fwd" (@[[PRE]]) -> (@[[H:t[0-9]+]]) args {}
// BIAS-ONLY-NEXT: exec.gemm @[[H]], @"param:w2" -> @{{t[0-9]+}} epilogue bias bias @"param:b2"
// BIAS-ONLY: exec.launch "sum_to" (@[[DY2:t[0-9]+]]) -> (@"grad:b2") args {accumulate = true}
// BIAS-ONLY: exec.gemm @[[H]], @[[DY2]] -> @"grad:w2" {beta = 1.000000e+00 : f32
// BIAS-ONLY: exec.launch "gelu_bwd" (@[[PRE]], @{{t[0-9]+}})
// BIAS-ONLY: exec.launch "sum_to" (@[[DY1:t[0-9]+]]) -> (@"grad:b1") args {accumulate = true}
// BIAS-ONLY: exec.gemm @{{.*}}, @[[DY1]] -> @"grad:w1" {beta = 1.000000e+00 : f32
// BIAS-ONLY: exec.program @optimizer
func.func @model() -> tensor<f32> {
  %t = graph.input "tokens" : tensor<2x4xi32>
  %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
  %w1 = graph.param "w1" normal(2.000000e-02) : tensor<8x16xf32>
  %b1 = graph.param "b1" zeros : tensor<16xf32>
  %w2 = graph.param "w2" normal(2.000000e-02) : tensor<16x8xf32>
  %b2 = graph.param "b2" zeros : tensor<8xf32>
  %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %p1 = graph.matmul %x, %w1 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %a1 = graph.add %p1, %b1 : tensor<2x4x16xf32>, tensor<16xf32>
  %h = graph.gelu %a1 : tensor<2x4x16xf32>
  %p2 = graph.matmul %h, %w2 : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %a2 = graph.add %p2, %b2 : tensor<2x4x8xf32>, tensor<8xf32>
  %logits = graph.matmul %a2, %e {transpose_b} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %loss = graph.cross_entropy %logits, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
