// The backward cut in two for the zero-bubble schedules (split-weights):
// @backward_c (B) keeps what the gradient it sends depends on, @weight_c
// (W) the weights' gradients and their accumulation, taking what it reads
// of B as the arguments @backward_c returns. Two layers, a tied embedding
// (strata-pipeline-split.mlir's model).
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" | FileCheck %s
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true recompute=full" | FileCheck %s --check-prefix=FULL
// A zero-bubble schedule runs the halves: ZB-H1 at p = 2, m = 3, each
// W after its B (stage 1 holds its first back a step), an exchange point
// before every step.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-h1" | FileCheck %s --check-prefix=ZB
// ZB-LABEL: dist.schedule stage 0 microbatches 3 attributes {kind = "zb-h1"} {
// ZB-NEXT: dist.step @forward_0 microbatch 0 {exchange}
// ZB-NEXT: dist.step @forward_0 microbatch 1 {exchange}
// ZB-NEXT: dist.step @backward_0 microbatch 0 {exchange}
// ZB-NEXT: dist.step @weight_0 microbatch 0 {exchange}
// ZB-NEXT: dist.step @forward_0 microbatch 2 {exchange}
// ZB-NEXT: dist.step @backward_0 microbatch 1 {exchange}
// ZB-NEXT: dist.step @weight_0 microbatch 1 {exchange}
// ZB-NEXT: dist.step @backward_0 microbatch 2 {exchange}
// ZB-NEXT: dist.step @weight_0 microbatch 2 {exchange}
// ZB-NEXT: dist.step @optimizer {exchange}
// ZB-LABEL: dist.schedule stage 1 microbatches 3 attributes {kind = "zb-h1"} {
// ZB-NEXT: dist.step @forward_1 microbatch 0 {exchange}
// ZB-NEXT: dist.step @backward_1 microbatch 0 {exchange}
// ZB-NEXT: dist.step @forward_1 microbatch 1 {exchange}
// ZB-NEXT: dist.step @backward_1 microbatch 1 {exchange}
// ZB-NEXT: dist.step @weight_1 microbatch 0 {exchange}
// ZB-NEXT: dist.step @forward_1 microbatch 2 {exchange}
// ZB-NEXT: dist.step @backward_1 microbatch 2 {exchange}
// ZB-NEXT: dist.step @weight_1 microbatch 1 {exchange}
// ZB-NEXT: dist.step @weight_1 microbatch 2 {exchange}
// ZB-NEXT: dist.step @optimizer {exchange}
// Lowered, the stash has three pools with slots of their own: a forward
// value only B reads is freed at B (`slot`), one W reads is held until W
// (`held`), and what B computes for W is passed in a third (`passed`),
// each sized by the schedule's order. Stage 1 (ZB-H1 holds its first W
// back): one slot until B, two held, two passed.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-h1" --strata-layout-optimizer-state --strata-lower-to-exec --strata-plan-memory | FileCheck %s --check-prefix=POOLS
// POOLS-LABEL: exec.template stage 1 attributes {held_slots = array<i64: 2>, passed_slots = array<i64: 2>, {{.*}}stash_slots = array<i64: 1>
// POOLS-DAG: stash at {{[0-9]+}} {slot_stride = {{[0-9]+}} : i64, stash_group = 0 : i64}
// POOLS-DAG: stash at {{[0-9]+}} {slot_stride = {{[0-9]+}} : i64, stash_group = 0 : i64, stash_pool = 1 : i32}
// POOLS-DAG: stash at {{[0-9]+}} {slot_stride = {{[0-9]+}} : i64, stash_group = 0 : i64, stash_pool = 2 : i32}
// POOLS: exec.run @forward_1 microbatch 0 slot 0 held 0 {exchange}
// POOLS-NEXT: exec.run @backward_1 microbatch 0 slot 0 held 0 passed 0 {exchange}
// POOLS-NEXT: exec.run @forward_1 microbatch 1 slot 0 held 1 {exchange}
// POOLS-NEXT: exec.run @backward_1 microbatch 1 slot 0 held 1 passed 1 {exchange}
// POOLS-NEXT: exec.run @weight_1 microbatch 0 held 0 passed 0 {exchange}
// POOLS-NEXT: exec.run @forward_1 microbatch 2 slot 0 held 0 {exchange}
// POOLS-NEXT: exec.run @backward_1 microbatch 2 slot 0 held 0 passed 0 {exchange}
// POOLS-NEXT: exec.run @weight_1 microbatch 1 held 1 passed 1 {exchange}
// POOLS-NEXT: exec.run @weight_1 microbatch 2 held 0 passed 0 {exchange}
// Any other pairing is refused, not a plan that never computes the
// weights' gradients (or calls a @weight_c that is not there).
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule=microbatches=2 2>&1 | FileCheck %s --check-prefix=WHOLE
// WHOLE: error: the 1f1b schedule runs each backward whole, but it is cut into @backward_c and @weight_c (--strata-pipeline-split split-weights): name a zero-bubble schedule
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split=stages=2 --strata-schedule="microbatches=2 pipeline-schedule=zb-h2" 2>&1 | FileCheck %s --check-prefix=CUT
// CUT: error: the zb-h2 schedule runs each backward cut in two, but it is whole: run --strata-pipeline-split split-weights
// zb-auto orders the halves from the costs and stash bytes it is given
// (strata-compile prices them on a cluster): with a limit of one
// microbatch's stash (10 + 20 + 40 bytes: kept until B, held until W,
// passed from B to W) a stage holds one microbatch at a time, its W right
// after its B and before the next forward.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto forward-costs=1,1 backward-costs=1,1 weight-costs=1,1 stash-bytes=10,20,40,10,20,40 max-stash-bytes=70" | FileCheck %s --check-prefix=AUTO
// AUTO-LABEL: dist.schedule stage 0 microbatches 3 attributes {kind = "zb-auto"} {
// AUTO-NEXT: dist.step @forward_0 microbatch 0 {exchange}
// AUTO-NEXT: dist.step @backward_0 microbatch 0 {exchange}
// AUTO-NEXT: dist.step @weight_0 microbatch 0 {exchange}
// AUTO-NEXT: dist.step @forward_0 microbatch 1 {exchange}
// zb-h1 given the stash bytes holds back only the W's that keep a stage
// within 1F1B's stash (here stage 0's, 2x10 + 2x20 + 40 = 100 bytes):
// stage 1 holding its first W back would keep 130, so it runs each W
// after its B; with a limit of 130 it is the paper's ZB-H1.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-h1 stash-bytes=10,20,40,10,20,40" | FileCheck %s --check-prefix=H1-WITHIN
// H1-WITHIN-LABEL: dist.schedule stage 1 microbatches 3 attributes {kind = "zb-h1"} {
// H1-WITHIN-NEXT: dist.step @forward_1 microbatch 0 {exchange}
// H1-WITHIN-NEXT: dist.step @backward_1 microbatch 0 {exchange}
// H1-WITHIN-NEXT: dist.step @weight_1 microbatch 0 {exchange}
// H1-WITHIN-NEXT: dist.step @forward_1 microbatch 1 {exchange}
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-h1 stash-bytes=10,20,40,10,20,40 max-stash-bytes=130" | FileCheck %s --check-prefix=H1-ROOM
// H1-ROOM-LABEL: dist.schedule stage 1 microbatches 3 attributes {kind = "zb-h1"} {
// H1-ROOM-NEXT: dist.step @forward_1 microbatch 0 {exchange}
// H1-ROOM-NEXT: dist.step @backward_1 microbatch 0 {exchange}
// H1-ROOM-NEXT: dist.step @forward_1 microbatch 1 {exchange}
// H1-ROOM-NEXT: dist.step @backward_1 microbatch 1 {exchange}
// H1-ROOM-NEXT: dist.step @weight_1 microbatch 0 {exchange}
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-h1 stash-bytes=10,20,40,10,20,40 max-stash-bytes=99" 2>&1 | FileCheck %s --check-prefix=H1-SMALL
// H1-SMALL: error: ZB-H1 keeps at least 100 bytes of stash on stage 0 (1F1B's order with each W after its B), over the limit of 99
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-h1 stash-bytes=10,20,-40,10,20,40" 2>&1 | FileCheck %s --check-prefix=H1-NEGATIVE
// H1-NEGATIVE: error: ZB-H1's stash bytes must be at least 0, got -40
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-h1 stash-bytes=10,20,40,10,20,40 max-stash-bytes=-5" 2>&1 | FileCheck %s --check-prefix=H1-LIMIT
// H1-LIMIT: error: ZB-H1's stash limit must be at least 0 (0: 1F1B's), got -5
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-h1 stash-bytes=10,20" 2>&1 | FileCheck %s --check-prefix=H1-THREE
// H1-THREE: error: stash-bytes takes three numbers a chunk (kept until B, held until W, passed from B to W), got 2
// zb-auto's order chosen already (strata-compile's pricing searched to
// say what it chose, and passes the choice on): per stage its count of
// works, then phase (0 F, 1 B, 2 W), chunk, microbatch. It is checked as
// any order is: every work once, on its chunk's stage, after what it needs.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto order=9,0,0,0,0,0,1,1,0,0,2,0,0,0,0,2,1,0,1,2,0,1,1,0,2,2,0,2,9,0,1,0,1,1,0,2,1,0,0,1,1,1,1,1,2,1,1,0,1,2,1,1,2,2,1,2" | FileCheck %s --check-prefix=GIVEN
// GIVEN-LABEL: dist.schedule stage 0 microbatches 3 attributes {kind = "zb-auto"} {
// GIVEN-NEXT: dist.step @forward_0 microbatch 0 {exchange}
// GIVEN-NEXT: dist.step @forward_0 microbatch 1 {exchange}
// GIVEN-NEXT: dist.step @backward_0 microbatch 0 {exchange}
// GIVEN-NEXT: dist.step @weight_0 microbatch 0 {exchange}
// GIVEN-LABEL: dist.schedule stage 1 microbatches 3 attributes {kind = "zb-auto"} {
// GIVEN-NEXT: dist.step @forward_1 microbatch 0 {exchange}
// GIVEN-NEXT: dist.step @backward_1 microbatch 0 {exchange}
// GIVEN-NEXT: dist.step @weight_1 microbatch 0 {exchange}
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto order=9,0,0,0" 2>&1 | FileCheck %s --check-prefix=GIVEN-SHORT
// GIVEN-SHORT: error: the order given says stage 0 runs 9 works, but 1 follow
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto order=1,3,0,0,0" 2>&1 | FileCheck %s --check-prefix=GIVEN-PHASE
// GIVEN-PHASE: error: the order given has a work (3, 0, 0) on stage 0 that is not a phase 0-2, a chunk and a microbatch
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto order=1,0,0,0,0,5" 2>&1 | FileCheck %s --check-prefix=GIVEN-LONG
// GIVEN-LONG: error: the order given has 1 numbers after its 2 stages
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=1 pipeline-schedule=zb-auto order=2,0,0,0,1,0,0,2,0,1,0,1,1,0" 2>&1 | FileCheck %s --check-prefix=GIVEN-NO-W
// GIVEN-NO-W: error: the order given runs no W, but each backward is cut in two: every B needs its W
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto order=1,0,1,0,0" 2>&1 | FileCheck %s --check-prefix=GIVEN-WRONG
// GIVEN-WRONG: error: the order given is not a schedule: stage 0 runs F0.1, but chunk 1 lives on stage 1
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto order=1,0,0,0,0" 2>&1 | FileCheck %s --check-prefix=GIVEN-MISSING
// GIVEN-MISSING: error: the order given is not a schedule: no stage runs B0.0
// What it is given must make sense, and only zb-auto takes costs (zb-h1
// the stash bytes too).
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-h1 forward-costs=1,1" 2>&1 | FileCheck %s --check-prefix=NOT-AUTO
// NOT-AUTO: error: costs are zb-auto's, but the schedule is zb-h1
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-h2 stash-bytes=10,20,40,10,20,40" 2>&1 | FileCheck %s --check-prefix=NOT-H1
// NOT-H1: error: stash bytes, their limit and an order chosen already are zb-auto's, zb-h1's and zb-v's, but the schedule is zb-h2
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto stash-bytes=1,2" 2>&1 | FileCheck %s --check-prefix=THREE
// THREE: error: stash-bytes takes three numbers a chunk (kept until B, held until W, passed from B to W), got 2
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto forward-costs=1,0 backward-costs=1,1 weight-costs=1,1" 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: zb-auto's costs must be positive and finite, got 0
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto forward-costs=1" 2>&1 | FileCheck %s --check-prefix=EACH
// EACH: error: zb-auto needs a forward, B and W cost and the stash's bytes for each of the 2 chunks
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto stash-bytes=10,20,40,10,20,40 max-stash-bytes=50" 2>&1 | FileCheck %s --check-prefix=SMALL
// SMALL: error: no zero-bubble order keeps the stash within 50 bytes a stage
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto max-stash-bytes=-1" 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: zb-auto's stash limit must be at least 0 (0: 1F1B's), got -1
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto transfer-cost=-1" 2>&1 | FileCheck %s --check-prefix=NEG-TRANSFER
// NEG-TRANSFER: error: zb-auto's transfer cost must be at least 0, got -1
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true" --strata-schedule="microbatches=3 pipeline-schedule=zb-auto stash-bytes=1,2,-3,4,5,6" 2>&1 | FileCheck %s --check-prefix=NEG-STASH
// NEG-STASH: error: zb-auto's stash bytes must be at least 0, got -3
// ZB-V's chunks in a V (placement=v): two a stage, chunk c on stage c and
// then 2p-1-c, so with one stage both are its own (the first stage runs
// its first chunk's W before that chunk's next forward); the schedule and
// the placement must agree.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=1 layers-per-virtual-stage=1 split-weights=true placement=v" --strata-schedule="microbatches=2 pipeline-schedule=zb-v" | FileCheck %s --check-prefix=V
// V: dist.schedule stage 0 microbatches 2 attributes {kind = "zb-v"} {
// V-NEXT: dist.step @forward_0 microbatch 0 {exchange}
// V-NEXT: dist.step @forward_1 microbatch 0 {exchange}
// V-NEXT: dist.step @backward_1 microbatch 0 {exchange}
// V-NEXT: dist.step @weight_1 microbatch 0 {exchange}
// V-NEXT: dist.step @backward_0 microbatch 0 {exchange}
// V-NEXT: dist.step @weight_0 microbatch 0 {exchange}
// V-NEXT: dist.step @forward_0 microbatch 1 {exchange}
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true placement=w" 2>&1 | FileCheck %s --check-prefix=PLACEMENT
// PLACEMENT: error: placement must be looped or v, got 'w'
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=2 split-weights=true placement=v" 2>&1 | FileCheck %s --check-prefix=V-CHUNKS
// V-CHUNKS: error: the V placement (zb-v) runs two chunks a stage, but the layers make 2 chunks on 2 stages: set --num-layers-per-virtual-pipeline-stage to half of each stage's layers
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=1 layers-per-virtual-stage=1 split-weights=true placement=v" --strata-schedule="microbatches=2 pipeline-schedule=zb-h1" 2>&1 | FileCheck %s --check-prefix=V-LOOPED
// V-LOOPED: error: the zb-h1 schedule runs looped chunks, but they are in a V (--strata-pipeline-split placement=v): name zb-v
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-pipeline-split="stages=1 layers-per-virtual-stage=1 split-weights=true" --strata-schedule="microbatches=2 pipeline-schedule=zb-v" 2>&1 | FileCheck %s --check-prefix=LOOPED-V
// LOOPED-V: error: the zb-v schedule runs two chunks a stage in a V, but the chunks are looped: run --strata-pipeline-split placement=v
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-schedule="microbatches=3 forward-costs=1" 2>&1 | FileCheck %s --check-prefix=NO-PIPELINE
// NO-PIPELINE: error: costs are zb-auto's, but the schedule is not named

// The forward is as without the split: it stashes the matmul before the
// gelu and the embedding's output.
// CHECK-LABEL: func.func @forward_0() -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// CHECK: return %[[M0:.*]], %[[X:.*]] :
// Chunk 0 sends nothing back: its B only receives, and passes the
// gradient and the stash on to W.
// CHECK-LABEL: func.func @backward_0(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// CHECK-NEXT: %[[G:.*]] = dist.recv from chunk 1 channel 1
// CHECK-NEXT: return %arg0, %[[G]], %arg1
// CHECK-LABEL: func.func @weight_0(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4x8xf32>, %arg2: tensor<2x4x8xf32>)
// CHECK: %[[DM:.*]] = graph.gelu_grad %arg0, %arg1
// CHECK: %[[B0:.*]] = graph.layer_boundary 0 %arg2
// CHECK: %[[DW0:.*]] = graph.matmul_weight_grad %[[B0]], %[[DM]]
// CHECK: graph.accumulate_grad "w0", %[[DW0]]
// CHECK: graph.embedding_grad
// CHECK: graph.accumulate_grad "e"
// CHECK-NEXT: return
// Chunk 1: B is the loss's gradient and each input gradient down to what
// it sends; the output layer's and layer 1's weight gradients are W's,
// from the output gradients B returns.
// CHECK-LABEL: func.func @backward_1(
// CHECK: %[[DL:.*]] = graph.cross_entropy_grad
// CHECK: %[[DB2:.*]] = graph.matmul %[[DL]], %{{.*}} {graph.backward_layer = 2 : i64}
// CHECK: %[[DM1:.*]] = graph.gelu_grad %{{.*}}, %[[DB2]]
// CHECK: %[[DX:.*]] = graph.matmul %[[DM1]], %{{.*}} {graph.backward_layer = 1 : i64, transpose_b}
// CHECK: %[[DIN:.*]] = graph.add %[[DB2]], %[[DX]]
// CHECK-NEXT: dist.send %[[DIN]] to chunk 0 channel 1
// CHECK-NOT: matmul_weight_grad
// CHECK-NOT: accumulate_grad
// CHECK: return %{{.*}}, %[[DL]], %{{.*}}, %[[DM1]] :
// The layer boundaries (views) W makes again from the stashed values B
// passes on.
// CHECK-LABEL: func.func @weight_1(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4x32xf32>, %arg2: tensor<2x4x8xf32>, %arg3: tensor<2x4x8xf32>)
// CHECK-NEXT: %[[B2:.*]] = graph.layer_boundary 2 %arg0
// CHECK-NEXT: %[[DE:.*]] = graph.matmul_weight_grad %[[B2]], %arg1 {graph.backward_layer = 2 : i64, transpose_result}
// CHECK-NEXT: graph.accumulate_grad "e", %[[DE]]
// CHECK-NEXT: %[[B1:.*]] = graph.layer_boundary 1 %arg2
// CHECK-NEXT: %[[DW1:.*]] = graph.matmul_weight_grad %[[B1]], %arg3
// CHECK-NEXT: graph.accumulate_grad "w1", %[[DW1]]
// CHECK-NEXT: return
// The tied embedding's accumulators are W's on both stages: still tied.
// CHECK-LABEL: func.func @optimizer
// CHECK-NEXT: dist.tie_gradients "e" on @mesh stages = [0, 1]

// Full recomputation: layer 1's input is stashed; B runs the forward again
// for what it reads, and W takes the layer input it needs through B.
// FULL-LABEL: func.func @backward_1(
// FULL: graph.layer_boundary 1 %arg
// FULL: graph.matmul
// FULL: graph.gelu_grad
// FULL: dist.send
// FULL-LABEL: func.func @weight_1(
// FULL: graph.matmul_weight_grad
// FULL: graph.accumulate_grad "w1"
module {
func.func @model() -> tensor<f32> {
  %t = graph.input "tokens" : tensor<2x4xi32>
  %y = graph.input "labels" : tensor<2x4xi32>
  %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
  %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %b0 = graph.layer_boundary 0 %x : tensor<2x4x8xf32>
  %w0 = graph.param "w0" normal(2.000000e-02) : tensor<8x8xf32>
  %m0 = graph.matmul %b0, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g0 = graph.gelu %m0 : tensor<2x4x8xf32>
  %r0 = graph.add %b0, %g0 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %b1 = graph.layer_boundary 1 %r0 : tensor<2x4x8xf32>
  %w1 = graph.param "w1" normal(2.000000e-02) : tensor<8x8xf32>
  %m1 = graph.matmul %b1, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g1 = graph.gelu %m1 : tensor<2x4x8xf32>
  %r1 = graph.add %b1, %g1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %b2 = graph.layer_boundary 2 %r1 : tensor<2x4x8xf32>
  %l = graph.matmul %b2, %e {transpose_b} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %loss = graph.cross_entropy %l, %y : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}
