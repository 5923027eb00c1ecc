// The exec lowering from scheduled dist IR, for a layout where every rank-
// dependent value shows: t=2 (a vocabulary-parallel, tied embedding),
// d=2 with the distributed optimizer, p=2 with two microbatches (1F1B).
// Its rules:
// - one exec.template per pipeline stage, SPMD over the stage's tensor- and
//   data-parallel ranks: what differs between them is a per_rank
//   expression [mesh axis, stride per coordinate] resolved at load (a
//   vocabulary offset, a distributed optimizer's own part of a bucket,
//   the optimizer kernels' part and first_part);
// - parameters, gradients and the optimizer state live in flat regions
//   laid out in buckets, per chunk in reverse parameter order; gradients
//   another collective finishes first (a tied embedding's) go in the last
//   bucket; each bucket's reduction and gather is an instruction of the
//   optimizer, on the compute stream, marked exec.bucket;
// - a parameter records its split dimension and its global shape;
// - pipeline transfers run on the communication stream, ordered by
//   events: receives lead a program (a receive into the stash also waits
//   for the chunk's backward to free its slot), sends trail it;
// - a chunk's forward leaves what its backward reads in the stash, one
//   slot per microbatch in flight (stash_slots);
// - the optimizer is a fixed handful of launches whatever the parameter
//   count; the tied embedding's gradient is summed over its stages before
//   the data-parallel reduction and counted in the norm on its first stage.
// RUN: strata-opt %s --strata-layout-optimizer-state --strata-lower-to-exec | FileCheck %s

// CHECK-LABEL: exec.template stage 0 attributes {stash_slots = array<i64: 2>}
// CHECK: exec.buffer @params : tensor<192xf32> persistent at -1
// CHECK: exec.buffer @grads : tensor<192xf32> persistent at -1 {zero_init}
// The state holds each rank's own half of every bucket.
// CHECK: exec.buffer @exp_avg : tensor<96xf32> persistent at -1 {zero_init}
// Bucket 0 (w0) and its part on data-parallel rank r: 32 elements at byte
// 128·r; bucket 1 (the tied e) last.
// CHECK: exec.buffer @"bucket:0" : tensor<64xf32> persistent at -1 alias @grads
// CHECK: exec.buffer @"own:0" : tensor<32xf32> persistent at -1 alias @grads {per_rank = array<i64: 1, 128>}
// CHECK: exec.buffer @"bucket:1" : tensor<128xf32> persistent at -1 alias @grads + 256
// CHECK: exec.buffer @"own:1" : tensor<64xf32> persistent at -1 alias @grads + 256 {per_rank = array<i64: 1, 256>}
// CHECK: exec.param "e" {global_shape = array<i64: 32, 8>, grad = @"grad:e", init = "normal", padded_shape = array<i64: 32, 8>, split_dim = 0 : i64, std = 2.000000e-02 : f64, value = @"param:e"}
// CHECK: exec.program @forward_0 forward attributes {chunk = 0 : i64} {
// CHECK-NEXT: exec.wait @"sent:forward_0"{{$}}
// Each tensor-parallel rank looks up its 16 rows of the vocabulary.
// CHECK-NEXT: exec.launch "embedding_fwd" (@"param:e", @"input:tokens") -> (@[[E:t[0-9]+]]) args {vocab_offset = 0 : i64} per_rank {vocab_offset = array<i64: 0, 16>}
// CHECK-NEXT: exec.collective all_reduce_sum @[[E]] -> @[[X:s[0-9]+]] over [0]
// CHECK: exec.record @"computed:forward_0"{{$}}
// CHECK-NEXT: exec.wait @"computed:forward_0" on comm
// CHECK-NEXT: exec.send @{{t[0-9]+}} to stage 1 channel 0
// CHECK-NEXT: exec.record @"sent:forward_0" on comm
// CHECK: exec.program @backward_0 backward attributes {chunk = 0 : i64} {
// CHECK-NEXT: exec.wait @"computed:backward_0" on comm
// CHECK-NEXT: exec.recv @[[DY:t[0-9]+]] from stage 1 channel 1
// CHECK-NEXT: exec.record @"received:backward_0" on comm
// CHECK-NEXT: exec.wait @"received:backward_0"{{$}}
// CHECK: exec.gemm @[[X]], @{{t[0-9]+}} -> @"grad:w0" {beta = 1.000000e+00 : f32
// CHECK: exec.launch "embedding_bwd" ({{.*}}) -> (@"grad:e") args {accumulate = true, vocab_offset = 0 : i64} per_rank {vocab_offset = array<i64: 0, 16>}
// CHECK: exec.program @optimizer optimizer {
// CHECK-NEXT: exec.collective all_reduce_sum @"grad:e" -> @"grad:e" over [2] stages [0, 1]
// CHECK-NEXT: exec.collective reduce_scatter @"bucket:0" -> @"own:0" over [1] {exec.bucket = 0 : i64}
// CHECK-NEXT: exec.collective reduce_scatter @"bucket:1" -> @"own:1" over [1] {exec.bucket = 1 : i64}
// The norm: w0 (replicated over tp) counted on tp rank 0 only, e (split)
// on every rank; each rank sums its own parts.
// CHECK-NEXT: exec.launch "sum_squares" (@grads) -> (@sum_squares) args {first_part = 0 : i64, first_segments = array<i64: 0, 64>, part = 0 : i64, segments = array<i64: 64, 128>, windows = array<i64: 0, 32, 0, 64, 64, 32>} per_rank {first_part = array<i64: 0, 1>, part = array<i64: 1, 1>}
// CHECK-NEXT: exec.collective all_reduce_sum @sum_squares -> @sum_squares_total over [0, 1, 2]
// CHECK-NEXT: exec.launch "clip_coefficient"
// CHECK-NEXT: exec.launch "adamw" (@grads, @coefficient, @hyper) -> (@params, @exp_avg, @exp_avg_sq) args {part = 0 : i64, segments = array<i64: 0, 192, 1>, windows = array<i64: 0, 32, 0, 64, 64, 32>} per_rank {part = array<i64: 1, 1>}
// CHECK-NEXT: exec.launch "fill" () -> (@grads)
// CHECK-NEXT: exec.collective all_gather @"own-params:0" -> @"bucket-params:0" over [1] {exec.bucket = 0 : i64}
// CHECK-NEXT: exec.collective all_gather @"own-params:1" -> @"bucket-params:1" over [1] {exec.bucket = 1 : i64}
// CHECK-NEXT: exec.launch "copy" (@norm) -> (@"output:grad_norm")
// Two microbatches in flight on stage 0: two stash slots.
// CHECK: exec.schedule attributes {kind = "1f1b"} {
// CHECK-NEXT: exec.run @forward_0 microbatch 0 slot 0 {exchange}
// CHECK-NEXT: exec.run @forward_0 microbatch 1 slot 1 {exchange}
// CHECK-NEXT: exec.run @backward_0 microbatch 0 slot 0 {exchange}
// CHECK-NEXT: exec.run @backward_0 microbatch 1 slot 1 {exchange}
// CHECK-NEXT: exec.run @optimizer {exchange}

// CHECK-LABEL: exec.template stage 1 attributes {stash_slots = array<i64: 1>}
// CHECK: exec.program @forward_1 forward attributes {chunk = 1 : i64} {
// The received activation goes into the stash: its slot must be free.
// CHECK-NEXT: exec.wait @"computed:forward_1" on comm
// CHECK-NEXT: exec.wait @"freed:chunk1" on comm
// CHECK-NEXT: exec.recv @[[IN:s[0-9]+]] from stage 0 channel 0
// CHECK-NEXT: exec.record @"received:forward_1" on comm
// CHECK-NEXT: exec.wait @"received:forward_1"{{$}}
// The vocabulary-parallel loss: each rank's statistics over its 16 columns.
// CHECK: exec.launch "logits_max" (@{{t[0-9]+}}) -> (@{{t[0-9]+}}) args {vocab_offset = 0 : i64, vocab_size = 32 : i64} per_rank {vocab_offset = array<i64: 0, 16>}
// CHECK-NEXT: exec.collective all_reduce_max
// CHECK: exec.launch "copy" (@{{t[0-9]+}}) -> (@"output:loss")
// CHECK-NEXT: exec.record @"computed:forward_1"{{$}}
// CHECK: exec.program @backward_1 backward attributes {chunk = 1 : i64} {
// CHECK-NEXT: exec.wait @"sent:backward_1"{{$}}
// CHECK: exec.record @"computed:backward_1"{{$}}
// CHECK-NEXT: exec.record @"freed:chunk1"{{$}}
// CHECK-NEXT: exec.wait @"computed:backward_1" on comm
// CHECK-NEXT: exec.send @{{t[0-9]+}} to stage 0 channel 1
// CHECK-NEXT: exec.record @"sent:backward_1" on comm
// The tied e is counted on its first stage: not in stage 1's norm.
// CHECK: exec.launch "sum_squares" (@grads) -> (@sum_squares) args {first_part = 0 : i64, first_segments = array<i64: 0, 64>, part = 0 : i64, segments = array<i64>,
module {
  shard.grid @mesh(shape = 2x2x2)
  func.func @forward_0() -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) attributes {dist.chunk = 0 : i64} {
    %0 = graph.param "w0" normal(2.000000e-02) : tensor<8x8xf32>
    %1 = graph.input "tokens" : tensor<2x4xi32>
    %2 = graph.param "e" normal(2.000000e-02) {dist.global_shape = array<i64: 32, 8>, dist.split_dim = 0 : i64} : tensor<16x8xf32>
    %3 = graph.embedding %2, %1 {dist.vocab_parallel} : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %all_reduce = shard.all_reduce %3 on @mesh grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
    %4 = graph.layer_boundary 0 %all_reduce : tensor<2x4x8xf32>
    %5 = graph.matmul %4, %0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %6 = graph.gelu %5 : tensor<2x4x8xf32>
    %7 = graph.add %4, %6 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    dist.send %7 to chunk 1 channel 0 : tensor<2x4x8xf32>
    return %5, %all_reduce : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  }
  func.func @backward_0(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4x8xf32>) attributes {dist.chunk = 0 : i64} {
    %0 = graph.input "tokens" : tensor<2x4xi32>
    %1 = graph.param "w0" normal(2.000000e-02) : tensor<8x8xf32>
    %2 = dist.recv from chunk 1 channel 1 : tensor<2x4x8xf32>
    %3 = graph.gelu_grad %arg0, %2 {graph.backward_layer = 0 : i64} : tensor<2x4x8xf32>
    %4 = graph.matmul %3, %1 {graph.backward_layer = 0 : i64, transpose_b} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %5 = graph.add %2, %4 {graph.backward_layer = 0 : i64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %6 = graph.layer_boundary 0 %arg1 : tensor<2x4x8xf32>
    %7 = graph.matmul_weight_grad %6, %3 {graph.backward_layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
    graph.accumulate_grad "w0", %7 {graph.backward_layer = 0 : i64} : tensor<8x8xf32>
    %8 = graph.embedding_grad %5, %0 {dist.vocab_parallel, graph.backward_layer = -1 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
    graph.accumulate_grad "e", %8 {graph.backward_layer = -1 : i64} : tensor<16x8xf32>
    return
  }
  func.func @forward_1() -> (tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) attributes {dist.chunk = 1 : i64} {
    %0 = graph.constant 2.500000e-01 : tensor<f32>
    %1 = graph.input "labels" : tensor<2x4xi32>
    %2 = graph.param "e" normal(2.000000e-02) {dist.global_shape = array<i64: 32, 8>, dist.split_dim = 0 : i64} : tensor<16x8xf32>
    %3 = graph.param "w1" normal(2.000000e-02) : tensor<8x8xf32>
    %4 = dist.recv from chunk 0 channel 0 : tensor<2x4x8xf32>
    %5 = graph.layer_boundary 1 %4 : tensor<2x4x8xf32>
    %6 = graph.matmul %5, %3 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %7 = graph.gelu %6 : tensor<2x4x8xf32>
    %8 = graph.add %5, %7 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %9 = graph.layer_boundary 2 %8 : tensor<2x4x8xf32>
    %10 = graph.matmul %9, %2 {transpose_b} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    %11 = graph.logits_max %10 {dist.vocab_parallel, vocab_size = 32 : i64} : (tensor<2x4x16xf32>) -> tensor<2x4xf32>
    %all_reduce = shard.all_reduce %11 on @mesh grid_axes = [0] reduction =  max : tensor<2x4xf32> -> tensor<2x4xf32>
    %12 = graph.logits_target %10, %1 {dist.vocab_parallel, vocab_size = 32 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<2x4xf32>
    %all_reduce_0 = shard.all_reduce %12 on @mesh grid_axes = [0] : tensor<2x4xf32> -> tensor<2x4xf32>
    %13 = graph.logits_sum_exp %10, %all_reduce {dist.vocab_parallel, vocab_size = 32 : i64} : (tensor<2x4x16xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %all_reduce_1 = shard.all_reduce %13 on @mesh grid_axes = [0] : tensor<2x4xf32> -> tensor<2x4xf32>
    %loss, %logits_grad = graph.cross_entropy_with_grad_from_stats %10, %1, %all_reduce, %all_reduce_1, %all_reduce_0, %0 {dist.vocab_parallel, vocab_size = 32 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<f32>) -> (tensor<f32>, tensor<2x4x16xf32>)
    dist.loss %loss : tensor<f32>
    return %logits_grad, %8, %6, %4 : tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
  }
  func.func @backward_1(%arg0: tensor<2x4x16xf32>, %arg1: tensor<2x4x8xf32>, %arg2: tensor<2x4x8xf32>, %arg3: tensor<2x4x8xf32>) attributes {dist.chunk = 1 : i64} {
    %0 = graph.param "w1" normal(2.000000e-02) : tensor<8x8xf32>
    %1 = graph.param "e" normal(2.000000e-02) {dist.global_shape = array<i64: 32, 8>, dist.split_dim = 0 : i64} : tensor<16x8xf32>
    %2 = graph.matmul %arg0, %1 {graph.backward_layer = 2 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    %3 = graph.layer_boundary 2 %arg1 : tensor<2x4x8xf32>
    %4 = graph.matmul_weight_grad %3, %arg0 {graph.backward_layer = 2 : i64, transpose_result} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<16x8xf32>
    graph.accumulate_grad "e", %4 {graph.backward_layer = 2 : i64} : tensor<16x8xf32>
    %all_reduce = shard.all_reduce %2 on @mesh grid_axes = [0] {graph.backward_layer = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
    %5 = graph.gelu_grad %arg2, %all_reduce {graph.backward_layer = 1 : i64} : tensor<2x4x8xf32>
    %6 = graph.matmul %5, %0 {graph.backward_layer = 1 : i64, transpose_b} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %7 = graph.add %all_reduce, %6 {graph.backward_layer = 1 : i64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %8 = graph.layer_boundary 1 %arg3 : tensor<2x4x8xf32>
    %9 = graph.matmul_weight_grad %8, %5 {graph.backward_layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
    graph.accumulate_grad "w1", %9 {graph.backward_layer = 1 : i64} : tensor<8x8xf32>
    dist.send %7 to chunk 0 channel 1 : tensor<2x4x8xf32>
    return
  }
  func.func @optimizer() -> tensor<f32> {
    dist.tie_gradients "e" on @mesh stages = [0, 1]
    dist.reduce_gradients on @mesh grid_axes = [1] {bucket_elements = 40000000 : i64, distributed_optimizer}
    %0 = graph.grad "e" : tensor<16x8xf32>
    %1 = graph.sum_squares %0 : tensor<16x8xf32>
    %2 = graph.grad "w0" : tensor<8x8xf32>
    %3 = graph.sum_squares %2 : tensor<8x8xf32>
    %4 = dist.keep_on_first %3 on @mesh grid_axes = [0] : tensor<f32>
    %5 = graph.add %1, %4 : tensor<f32>, tensor<f32>
    %6 = graph.grad "w1" : tensor<8x8xf32>
    %7 = graph.sum_squares %6 : tensor<8x8xf32>
    %8 = dist.keep_on_first %7 on @mesh grid_axes = [0] : tensor<f32>
    %9 = graph.add %5, %8 : tensor<f32>, tensor<f32>
    %all_reduce = shard.all_reduce %9 on @mesh grid_axes = [0, 1, 2] : tensor<f32> -> tensor<f32>
    %norm, %coefficient = graph.clip_coefficient %all_reduce
    graph.adamw "e", %0, %coefficient {weight_decay} : tensor<16x8xf32>
    graph.adamw "w0", %2, %coefficient {weight_decay} : tensor<8x8xf32>
    graph.adamw "w1", %6, %coefficient {weight_decay} : tensor<8x8xf32>
    return %norm : tensor<f32>
  }
  dist.schedule stage 0 microbatches 2 attributes {kind = "1f1b"} {
    dist.step @forward_0 microbatch 0 {exchange}
    dist.step @forward_0 microbatch 1 {exchange}
    dist.step @backward_0 microbatch 0 {exchange}
    dist.step @backward_0 microbatch 1 {exchange}
    dist.step @optimizer {exchange}
  }
  dist.schedule stage 1 microbatches 2 attributes {kind = "1f1b"} {
    dist.step @forward_1 microbatch 0 {exchange}
    dist.step @backward_1 microbatch 0 {exchange}
    dist.step @forward_1 microbatch 1 {exchange}
    dist.step @backward_1 microbatch 1 {exchange}
    dist.step @optimizer {exchange}
  }
}
