// GELU's tanh form (gelu(x, tanh=true), GPT-2's) keeps its form through the
// backward and is never fused into a gemm's gelu_bias epilogue, whose GELU
// is the erf one: the gemm takes only the bias, and the GELU and its
// gradient are gelu_tanh launches.
// RUN: strata-opt %s --strata-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-schedule=microbatches=1 --strata-fuse-epilogues --strata-layout-optimizer-state --strata-lower-to-exec | FileCheck %s --implicit-check-not=gelu_bias --implicit-check-not='"gelu_fwd"' --implicit-check-not='"gelu_bwd"'

// GRAD: graph.gelu %[[A:[0-9]+]] tanh : tensor<2x4x16xf32>
// GRAD: graph.gelu_grad %[[A]], %{{[0-9]+}} tanh {{.*}}: tensor<2x4x16xf32>

// CHECK: exec.program @microbatch microbatch {
// CHECK: exec.gemm @{{.*}}, @"param:w1" -> @[[PRE:t[0-9]+]] epilogue bias bias @"param:b1" {k = 8 : i64
// CHECK-NEXT: exec.launch "gelu_tanh_fwd" (@[[PRE]]) -> (@[[H:t[0-9]+]]) args {}
// CHECK-NEXT: exec.gemm @[[H]], @"param:w2" -> @{{t[0-9]+}} epilogue bias bias @"param:b2"
// CHECK: exec.launch "gelu_tanh_bwd" (@[[PRE]], @{{t[0-9]+}})
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
  %h = graph.gelu %a1 tanh : tensor<2x4x16xf32>
  %p2 = graph.matmul %h, %w2 : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %a2 = graph.add %p2, %b2 : tensor<2x4x8xf32>, tensor<8xf32>
  %logits = graph.matmul %a2, %e {transpose_b} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %loss = graph.cross_entropy %logits, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
