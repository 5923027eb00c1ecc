// Pipeline schedules: four chunks on two stages (v = 2), each stage's
// order of forwards and backwards, then the optimizer.
// RUN: strata-opt %s --strata-schedule=microbatches=4 | FileCheck %s
// RUN: strata-opt %s --strata-schedule="microbatches=2 pipeline-schedule=gpipe" | FileCheck %s --check-prefix=GPIPE
// RUN: strata-opt %s --strata-schedule="microbatches=4 pipeline-schedule=gpipe" | FileCheck %s --check-prefix=GPIPE4
// RUN: not strata-opt %s --strata-schedule="microbatches=8 pipeline-schedule=gpipe" 2>&1 | FileCheck %s --check-prefix=STUCK
// RUN: strata-opt %s --strata-schedule=microbatches=3 --verify-diagnostics

// Interleaved 1F1B by default with several chunks per stage: stage 0
// warms up with 2(p-1) + (v-1)p = 4 forwards, stage 1 with 2. Transfers
// are posted at exchange points as Megatron posts them: before each
// warm-up forward, each steady-state forward-backward pair, each
// cool-down backward, and the optimizer.
// CHECK: dist.schedule stage 0 microbatches 4 attributes {kind = "interleaved"} {
// CHECK-NEXT: dist.step @forward_0 microbatch 0 {exchange}
// CHECK-NEXT: dist.step @forward_0 microbatch 1 {exchange}
// CHECK-NEXT: dist.step @forward_2 microbatch 0 {exchange}
// CHECK-NEXT: dist.step @forward_2 microbatch 1 {exchange}
// CHECK-NEXT: dist.step @forward_0 microbatch 2 {exchange}
// CHECK-NEXT: dist.step @backward_2 microbatch 0{{$}}
// CHECK-NEXT: dist.step @forward_0 microbatch 3 {exchange}
// CHECK-NEXT: dist.step @backward_2 microbatch 1{{$}}
// CHECK-NEXT: dist.step @forward_2 microbatch 2 {exchange}
// CHECK-NEXT: dist.step @backward_0 microbatch 0{{$}}
// CHECK-NEXT: dist.step @forward_2 microbatch 3 {exchange}
// CHECK-NEXT: dist.step @backward_0 microbatch 1{{$}}
// CHECK-NEXT: dist.step @backward_2 microbatch 2 {exchange}
// CHECK-NEXT: dist.step @backward_2 microbatch 3 {exchange}
// CHECK-NEXT: dist.step @backward_0 microbatch 2 {exchange}
// CHECK-NEXT: dist.step @backward_0 microbatch 3 {exchange}
// CHECK-NEXT: dist.step @optimizer {exchange}
// CHECK-NEXT: }
// CHECK: dist.schedule stage 1 microbatches 4 attributes {kind = "interleaved"} {
// CHECK-NEXT: dist.step @forward_1 microbatch 0
// CHECK-NEXT: dist.step @forward_1 microbatch 1
// CHECK-NEXT: dist.step @forward_3 microbatch 0
// CHECK-NEXT: dist.step @backward_3 microbatch 0
// CHECK-NEXT: dist.step @forward_3 microbatch 1
// CHECK-NEXT: dist.step @backward_3 microbatch 1
// CHECK-NEXT: dist.step @forward_1 microbatch 2
// CHECK-NEXT: dist.step @backward_1 microbatch 0
// CHECK-NEXT: dist.step @forward_1 microbatch 3
// CHECK-NEXT: dist.step @backward_1 microbatch 1
// CHECK-NEXT: dist.step @forward_3 microbatch 2
// CHECK-NEXT: dist.step @backward_3 microbatch 2
// CHECK-NEXT: dist.step @forward_3 microbatch 3
// CHECK-NEXT: dist.step @backward_3 microbatch 3
// CHECK-NEXT: dist.step @backward_1 microbatch 2
// CHECK-NEXT: dist.step @backward_1 microbatch 3
// CHECK-NEXT: dist.step @optimizer {exchange}
// CHECK-NEXT: }

// GPIPE: dist.schedule stage 1 microbatches 2 attributes {kind = "gpipe"} {
// GPIPE-NEXT: dist.step @forward_1 microbatch 0
// GPIPE-NEXT: dist.step @forward_1 microbatch 1
// GPIPE-NEXT: dist.step @forward_3 microbatch 0
// GPIPE-NEXT: dist.step @forward_3 microbatch 1
// GPIPE-NEXT: dist.step @backward_3 microbatch 0
// GPIPE: dist.step @backward_1 microbatch 1
// GPIPE-NEXT: dist.step @optimizer

// GPipe with virtual stages holds a chunk's outputs back until the next
// chunk's turn: stage 1's sends down to stage 0 wait there to be received
// (NCCL's sends do), on the stream of activations down the stages only,
// so with 4 microbatches it runs. With 8, stage 1's third forward would
// overwrite the output its first is still waiting to hand over, and stage
// 0, still in its first chunk, waits for stage 1 to take its fourth: the
// schedule is refused.
// STUCK: error: the gpipe schedule would deadlock where sends wait to be received (NCCL): stage 0 waits before F4.0; stage 1 waits before F2.1
// GPIPE4: dist.schedule stage 1 microbatches 4 attributes {kind = "gpipe"} {
// GPIPE4-NEXT: dist.step @forward_1 microbatch 0
// GPIPE4-NEXT: dist.step @forward_1 microbatch 1
// GPIPE4-NEXT: dist.step @forward_1 microbatch 2
// GPIPE4-NEXT: dist.step @forward_1 microbatch 3
// GPIPE4-NEXT: dist.step @forward_3 microbatch 0

// expected-error @below {{the interleaved schedule needs the number of microbatches (3) to be a multiple of the pipeline-parallel size (2)}}
module {
  shard.grid @mesh(shape = 1x1x2)
  func.func @forward_0() attributes {dist.chunk = 0 : i64} { return }
  func.func @backward_0() attributes {dist.chunk = 0 : i64} { return }
  func.func @forward_1() attributes {dist.chunk = 1 : i64} { return }
  func.func @backward_1() attributes {dist.chunk = 1 : i64} { return }
  func.func @forward_2() attributes {dist.chunk = 2 : i64} { return }
  func.func @backward_2() attributes {dist.chunk = 2 : i64} { return }
  func.func @forward_3() attributes {dist.chunk = 3 : i64} { return }
  func.func @backward_3() attributes {dist.chunk = 3 : i64} { return }
  func.func @optimizer() { return }
}
