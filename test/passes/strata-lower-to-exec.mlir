// The step as buffers, kernels, programs and a schedule.
// RUN: strata-opt %s --strata-autodiff=loss-scale=0.5 --strata-optimizer --strata-schedule=microbatches=2 --strata-layout-optimizer-state --strata-lower-to-exec | FileCheck %s
// RUN: strata-opt %s --strata-autodiff=loss-scale=0.5 --strata-optimizer --strata-schedule=microbatches=2 --strata-layout-optimizer-state --strata-lower-to-exec=bf16=true | FileCheck %s --check-prefix=BF16

// Parameters, gradients and the optimizer's state lie in flat regions, each
// parameter a view.
// CHECK: exec.template stage 0 {
// CHECK-DAG: exec.buffer @params : tensor<384xf32> persistent at -1
// CHECK-DAG: exec.buffer @grads : tensor<384xf32> persistent at -1 {zero_init}
// CHECK-DAG: exec.buffer @exp_avg : tensor<384xf32> persistent at -1 {zero_init}
// CHECK-DAG: exec.buffer @exp_avg_sq : tensor<384xf32> persistent at -1 {zero_init}
// CHECK-DAG: exec.buffer @hyper : tensor<9xf32> persistent at -1
// CHECK-DAG: exec.io "hyper" @hyper
// CHECK-DAG: exec.buffer @"input:tokens" : tensor<2x4xi32> persistent at -1
// CHECK-DAG: exec.io "tokens" @"input:tokens"
// CHECK-DAG: exec.buffer @"param:w" : tensor<8x16xf32> persistent at -1 alias @params + 1024
// CHECK-DAG: exec.buffer @"grad:w" : tensor<8x16xf32> persistent at -1 alias @grads + 1024
// CHECK-DAG: exec.param "w" {global_shape = array<i64: 8, 16>, grad = @"grad:w", init = "normal", padded_shape = array<i64: 8, 16>, std = 2.000000e-02 : f64, value = @"param:w"}
// CHECK-DAG: exec.io "loss" @"output:loss"
// CHECK-DAG: exec.io "grad_norm" @"output:grad_norm"
// A reshape is a view of the buffer it reshapes.
// CHECK-DAG: exec.buffer @[[FLAT:t[0-9]+]] : tensor<2x4x16xf32> workspace
// CHECK-DAG: exec.buffer @{{t[0-9]+}} : tensor<8x16xf32> workspace at -1 alias @[[FLAT]]
// CHECK: exec.program @microbatch microbatch {
// CHECK: exec.gemm @{{t[0-9]+}}, @"param:w" -> @{{t[0-9]+}} {k = 8 : i64, lda = 8 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64}
// The weight gradient goes straight into the accumulator (beta 1).
// CHECK: exec.gemm @{{t[0-9]+}}, @{{t[0-9]+}} -> @"grad:w" {beta = 1.000000e+00 : f32, k = 8 : i64, lda = 8 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transpose_a}
// CHECK: exec.launch "embedding_bwd" (@{{t[0-9]+}}, @"input:tokens") -> (@"grad:e") args {accumulate = true, vocab_offset = 0 : i64}
// CHECK: exec.launch "copy" (@{{t[0-9]+}}) -> (@"output:loss") args {}
// The optimizer: one sum of squares over the segments counted, the
// clipping coefficient, one AdamW over the segments updated (both
// parameters decay: one segment), one fill that zeroes the accumulators.
// The one bucket is one window, the rank's whole (part 0).
// CHECK: exec.program @optimizer optimizer {
// CHECK-NEXT: exec.launch "sum_squares" (@grads) -> (@sum_squares) args {first_part = 0 : i64, first_segments = array<i64>, part = 0 : i64, segments = array<i64: 0, 384>, windows = array<i64: 0, 384, 0>}
// CHECK-NEXT: exec.launch "clip_coefficient" (@sum_squares, @hyper) -> (@norm, @coefficient) args {}
// CHECK-NEXT: exec.launch "adamw" (@grads, @coefficient, @hyper) -> (@params, @exp_avg, @exp_avg_sq) args {part = 0 : i64, segments = array<i64: 0, 384, 1>, windows = array<i64: 0, 384, 0>}
// CHECK-NEXT: exec.launch "fill" () -> (@grads) args {value = 0.000000e+00 : f64}
// CHECK-NEXT: exec.launch "copy" (@norm) -> (@"output:grad_norm") args {}
// CHECK-NEXT: }
// CHECK: exec.schedule {
// CHECK-NEXT: exec.run @microbatch microbatch 0
// CHECK-NEXT: exec.run @microbatch microbatch 1
// CHECK-NEXT: exec.run @optimizer
// CHECK-NEXT: }

// bf16: parameters read by the model and activations are bf16; masters,
// gradients, moments and scalars fp32; AdamW writes the masters too.
// BF16-DAG: exec.buffer @params : tensor<384xbf16> persistent
// BF16-DAG: exec.buffer @master : tensor<384xf32> persistent
// BF16-DAG: exec.buffer @"param:w" : tensor<8x16xbf16> persistent at -1 alias @params + 512
// BF16-DAG: exec.buffer @"grad:w" : tensor<8x16xf32> persistent
// BF16-DAG: exec.buffer @"output:loss" : tensor<f32> persistent
// BF16: exec.launch "adamw" (@grads, @coefficient, @hyper) -> (@params, @exp_avg, @exp_avg_sq, @master)
func.func @model() -> tensor<f32> {
  %t = graph.input "tokens" : tensor<2x4xi32>
  %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
  %w = graph.param "w" normal(2.000000e-02) : tensor<8x16xf32>
  %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %h = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %f = graph.reshape %h : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %r = graph.reshape %f : tensor<8x16xf32> -> tensor<2x4x16xf32>
  %loss = graph.cross_entropy %r, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
