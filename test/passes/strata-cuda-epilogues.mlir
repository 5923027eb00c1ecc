// For the CUDA target, the epilogues cuBLASLt computes differently become
// launches after their gemm: gelu_bias keeps its bias add into the kept
// pre-activation and a gelu_fwd follows (cuBLASLt's GELU is the tanh
// form); bias_grad becomes a sum_to of op(B) into the bias's accumulator,
// accumulating as the gemm's beta 1 did (cuBLASLt's overwrites).
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-schedule=microbatches=1 --strata-lower-to-exec --strata-cuda-epilogues | FileCheck %s

// CHECK: exec.program @microbatch "microbatch" {
// CHECK: exec.gemm @{{.*}}, @"param:w1" -> @[[PRE:t[0-9]+]] epilogue bias bias @"param:b1" {k = 8 : i64
// CHECK-NEXT: exec.launch "gelu_fwd" (@[[PRE]]) -> (@[[H:t[0-9]+]]) args {}
// CHECK-NEXT: exec.gemm @[[H]], @"param:w2" -> @{{t[0-9]+}} epilogue bias bias @"param:b2"
// CHECK-NOT: gelu_bias
// CHECK: exec.gemm @[[H]], @[[DY2:t[0-9]+]] -> @"grad:w2" {beta = 1.000000e+00 : f32
// CHECK-NEXT: exec.launch "sum_to" (@[[DY2]]) -> (@"grad:b2") args {accumulate = true}
// CHECK: exec.launch "gelu_bwd" (@[[PRE]], @{{t[0-9]+}})
// CHECK: exec.gemm @{{.*}}, @[[DY1:t[0-9]+]] -> @"grad:w1" {beta = 1.000000e+00 : f32
// CHECK-NEXT: exec.launch "sum_to" (@[[DY1]]) -> (@"grad:b1") args {accumulate = true}
// CHECK-NOT: bias_grad
// CHECK: exec.program @optimizer
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
