// The optimizer-state layout writes each stage's buckets on its schedule
// (dist.buckets, in layout order). Its rules:
// - per chunk of the stage, parameters in reverse first-use order (the
//   order the backward produces their gradients), whole parameters up to
//   about the bucket size each; buckets and their members are then laid
//   out in forward order;
// - one last bucket (chunk -1) holds the gradients another collective
//   finishes first: partial sums over tensor-parallel ranks (the norm's
//   weights under sequence parallelism), then parameters tied across
//   stages (the embedding);
// - with virtual stages, each of the stage's chunks has buckets of its own
//   (a parameter belongs to the chunk that uses it first).
// The step is built from the model below up to the schedule, then laid out.
//
// Bucket size 100 elements: from the back, ln (16) and w1 (64) fill one
// (80, then w0 makes 144), e (256) one of its own.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-data-parallel="size=2 bucket-elements=100" --strata-schedule --strata-layout-optimizer-state | FileCheck %s --check-prefix=SIZE
// SIZE: dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [{chunk = 0 : i64, params = ["e"]}, {chunk = 0 : i64, params = ["w0", "w1", "ln.weight", "ln.bias"]}]}
// Under sequence parallelism a replicated weight's gradient is partial
// over tp (its input is split along the sequence): all but the
// vocabulary-parallel e go last.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-tensor-parallel="size=2 sequence-parallel=true" --strata-data-parallel=size=2 --strata-schedule --strata-layout-optimizer-state | FileCheck %s --check-prefix=PARTIAL
// PARTIAL: dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [{chunk = 0 : i64, params = ["e"]}, {chunk = -1 : i64, params = ["w0", "w1", "ln.weight", "ln.bias"]}]}
// Two stages: the embedding is tied between them, last on both, after
// the partial sums (each stage's parameters in the order its functions
// first use them).
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-tensor-parallel="size=2 sequence-parallel=true" --strata-pipeline-split=stages=2 --strata-schedule=microbatches=2 --strata-layout-optimizer-state | FileCheck %s --check-prefix=TIED
// TIED: dist.schedule stage 0 microbatches 2 attributes {dist.buckets = [{chunk = -1 : i64, params = ["w0", "e"]}], kind = "1f1b"}
// TIED: dist.schedule stage 1 microbatches 2 attributes {dist.buckets = [{chunk = -1 : i64, params = ["ln.bias", "ln.weight", "w1", "e"]}], kind = "1f1b"}
// Without tensor parallelism only the tied embedding is special.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split=stages=2 --strata-schedule=microbatches=2 --strata-layout-optimizer-state | FileCheck %s --check-prefix=STAGES
// STAGES: dist.schedule stage 0 microbatches 2 attributes {dist.buckets = [{chunk = 0 : i64, params = ["w0"]}, {chunk = -1 : i64, params = ["e"]}], kind = "1f1b"}
// STAGES: dist.schedule stage 1 microbatches 2 attributes {dist.buckets = [{chunk = 0 : i64, params = ["ln.bias", "ln.weight", "w1"]}, {chunk = -1 : i64, params = ["e"]}], kind = "1f1b"}
// Two virtual stages on one stage: a bucket per chunk; e, used by both,
// is chunk 0's, which uses it first.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=1 layers-per-virtual-stage=1" --strata-schedule="microbatches=2 pipeline-schedule=interleaved" --strata-layout-optimizer-state | FileCheck %s --check-prefix=VIRTUAL
// VIRTUAL: dist.schedule stage 0 microbatches 2 attributes {dist.buckets = [{chunk = 0 : i64, params = ["w0", "e"]}, {chunk = 1 : i64, params = ["ln.bias", "ln.weight", "w1"]}], kind = "interleaved"}
func.func @model() -> tensor<f32> {
  %t = graph.input "tokens" : tensor<2x4xi32>
  %y = graph.input "labels" : tensor<2x4xi32>
  %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
  %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %b0 = graph.layer_boundary 0 %x : tensor<2x4x8xf32>
  %w0 = graph.param "w0" normal(2.000000e-02) : tensor<8x8xf32>
  %m0 = graph.matmul %b0, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r0 = graph.add %b0, %m0 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %b1 = graph.layer_boundary 1 %r0 : tensor<2x4x8xf32>
  %w1 = graph.param "w1" normal(2.000000e-02) : tensor<8x8xf32>
  %m1 = graph.matmul %b1, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r1 = graph.add %b1, %m1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %b2 = graph.layer_boundary 2 %r1 : tensor<2x4x8xf32>
  %lw = graph.param "ln.weight" ones : tensor<8xf32>
  %lb = graph.param "ln.bias" zeros : tensor<8xf32>
  %n = graph.layer_norm %b2, %lw, %lb {epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %l = graph.matmul %n, %e {transpose_b} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %loss = graph.cross_entropy %l, %y : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
