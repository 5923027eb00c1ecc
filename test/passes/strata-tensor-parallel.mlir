// Tensor parallelism's rules (Megatron's layout, derived per op): every
// tensor of the step becomes replicated, split along one dimension, or
// partial (a summand on each rank), and a collective is inserted where an
// operand's sharding does not fit its consumer.
//   1. A matmul weight whose output feeds another matmul splits its columns
//      (column parallel, its bias with it); the second splits its rows (row
//      parallel) and its output is all-reduced (Megatron's g), the
//      gradient of the first's input too (Megatron's f).
//   2. An embedding table splits its vocabulary: the lookup is partial and
//      all-reduced; logits over the split vocabulary stay split, and the
//      loss is computed from three all-reduced row statistics (max, target
//      logit, sum of exponentials); the table's two gradients are local.
//   3. Attention splits its query heads; key/value heads split with them
//      when they divide, else stay replicated (grouped-query attention
//      reads them by `group_size`), their gradients then all-reduced.
//   4. Rope rotates each head along the sequence: it keeps a head split.
//   5. With sequence parallelism, the residual stream splits along the
//      sequence: reduce-scatter instead of all-reduce, all-gather before a
//      column-parallel matmul, norms on their shard with their parameters'
//      gradients all-reduced.
//   6. The gradient norm sums every split parameter's squares across ranks
//      and a replicated parameter's once (dist.keep_on_first).
//   7. A dimension that must split and does not divide is an error naming
//      the parameter or the op that cannot carry the split.
// RUN: strata-opt %s --split-input-file --strata-autodiff --strata-optimizer --strata-tensor-parallel=size=2 --verify-diagnostics | FileCheck %s
// RUN: strata-opt %s --split-input-file --strata-autodiff --strata-optimizer --strata-tensor-parallel="size=2 sequence-parallel" --verify-diagnostics | FileCheck %s --check-prefix=SP

// Rules 1 and 6: column- then row-parallel linears (an MLP).
// CHECK-LABEL: func.func @microbatch
// CHECK: %[[W1:.*]] = graph.param "fc1" {{.*}}{dist.global_shape = array<i64: 8, 16>, dist.split_dim = 1 : i64} : tensor<8x8xf32>
// CHECK: graph.param "fc1.bias" {{.*}}{dist.global_shape = array<i64: 16>, dist.split_dim = 0 : i64} : tensor<8xf32>
// CHECK: %[[W2:.*]] = graph.param "fc2" {{.*}}{dist.global_shape = array<i64: 16, 8>, dist.split_dim = 0 : i64} : tensor<8x8xf32>
// The row-parallel output's bias is replicated, added after the sum.
// CHECK: graph.param "fc2.bias" zeros : tensor<8xf32>
// CHECK: %[[M2:.*]] = graph.matmul %{{.*}}, %[[W2]] : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[G:.*]] = shard.all_reduce %[[M2]] on @mesh grid_axes = [0]
// CHECK-NEXT: graph.add %[[G]], %{{.*}} : tensor<2x4x8xf32>, tensor<8xf32>
// Forward: exactly that one all-reduce. Backward: one, of the gradient of
// the column-parallel matmul's input.
// CHECK-NOT: shard.all_reduce
// CHECK: %[[DX:.*]] = graph.matmul %{{.*}}, %[[W1]] {graph.backward_layer = 0 : i64, transpose_b}
// CHECK-NEXT: shard.all_reduce %[[DX]] on @mesh grid_axes = [0]
// CHECK-NOT: shard.all_reduce
// CHECK-NOT: shard.all_gather
// CHECK-LABEL: func.func @optimizer
// CHECK: %[[B:.*]] = graph.grad "fc2.bias"
// CHECK: %[[S:.*]] = graph.sum_squares %[[B]]
// CHECK: dist.keep_on_first %[[S]] on @mesh grid_axes = [0]
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [0] : tensor<f32>
// CHECK: graph.clip_coefficient
// With sequence parallelism the row-parallel output is reduce-scattered
// along the sequence instead; the replicated residual joins it by a local
// slice (no communication), and the loss gathers the whole sequence.
// SP-LABEL: func.func @microbatch(%arg0: tensor<2x4x8xf32>
// SP-NOT: shard.all_reduce
// SP: shard.reduce_scatter %{{.*}} on @mesh grid_axes = [0] scatter_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// SP-NEXT: graph.add %{{.*}} : tensor<2x2x8xf32>, tensor<8xf32>
// SP-NEXT: shard.all_slice %{{.*}} on @mesh grid_axes = [0] slice_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// SP: shard.all_gather %{{.*}} gather_axis = 1
// SP-NEXT: graph.cross_entropy
module {
func.func @model(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %b0 = graph.layer_boundary 0 %x : tensor<2x4x8xf32>
  %w1 = graph.param "fc1" normal(2.000000e-02) : tensor<8x16xf32>
  %c1 = graph.param "fc1.bias" zeros : tensor<16xf32>
  %m1 = graph.matmul %b0, %w1 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %a1 = graph.add %m1, %c1 : tensor<2x4x16xf32>, tensor<16xf32>
  %g = graph.gelu %a1 : tensor<2x4x16xf32>
  %w2 = graph.param "fc2" normal(2.000000e-02) : tensor<16x8xf32>
  %c2 = graph.param "fc2.bias" zeros : tensor<8xf32>
  %m2 = graph.matmul %g, %w2 : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %a2 = graph.add %m2, %c2 : tensor<2x4x8xf32>, tensor<8xf32>
  %r = graph.add %b0, %a2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %b1 = graph.layer_boundary 1 %r : tensor<2x4x8xf32>
  %loss = graph.cross_entropy %b1, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}

// -----

// Rule 2: a vocabulary-parallel embedding and loss (the table tied to the
// output layer, as GPT's).
// CHECK-LABEL: func.func @microbatch
// CHECK: %[[E:.*]] = graph.param "wte" {{.*}}{dist.global_shape = array<i64: 32, 8>, dist.split_dim = 0 : i64} : tensor<16x8xf32>
// CHECK: %[[X:.*]] = graph.embedding %[[E]], %{{.*}} {dist.vocab_parallel}
// CHECK-NEXT: shard.all_reduce %[[X]] on @mesh grid_axes = [0]
// CHECK: %[[L:.*]] = graph.matmul %{{.*}}, %[[E]] {transpose_b} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
// CHECK: %[[MAX:.*]] = graph.logits_max %[[L]] {dist.vocab_parallel, vocab_size = 32 : i64}
// CHECK-NEXT: %[[GMAX:.*]] = shard.all_reduce %[[MAX]] on @mesh grid_axes = [0] reduction = max
// CHECK-NEXT: %[[TGT:.*]] = graph.logits_target %[[L]], %{{.*}} {dist.vocab_parallel, vocab_size = 32 : i64}
// CHECK-NEXT: %[[GTGT:.*]] = shard.all_reduce %[[TGT]] on @mesh grid_axes = [0] :
// CHECK-NEXT: %[[SUM:.*]] = graph.logits_sum_exp %[[L]], %[[GMAX]] {dist.vocab_parallel, vocab_size = 32 : i64}
// CHECK-NEXT: %[[GSUM:.*]] = shard.all_reduce %[[SUM]] on @mesh grid_axes = [0] :
// CHECK-NEXT: graph.cross_entropy_from_stats %[[GMAX]], %[[GSUM]], %[[GTGT]]
// CHECK: graph.cross_entropy_grad_from_stats %[[L]], %{{.*}}, %[[GMAX]], %[[GSUM]], %{{.*}} {dist.vocab_parallel
// CHECK: graph.accumulate_grad "wte", %{{.*}} : tensor<16x8xf32>
// CHECK: graph.embedding_grad %{{.*}} {dist.vocab_parallel, graph.backward_layer = -1 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
// CHECK-NEXT: graph.accumulate_grad "wte", %{{.*}} : tensor<16x8xf32>
// A split table's gradient needs no reduction: its squares are summed
// across ranks with the rest.
// CHECK-LABEL: func.func @optimizer
// CHECK-NOT: dist.keep_on_first
// CHECK: graph.adamw "wte"
module {
func.func @model(%t: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> tensor<f32> {
  %e = graph.param "wte" normal(2.000000e-02) : tensor<32x8xf32>
  %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %b0 = graph.layer_boundary 0 %x : tensor<2x4x8xf32>
  %l = graph.matmul %b0, %e {transpose_b} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %loss = graph.cross_entropy %l, %y : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}

// -----

// Rule 3: grouped-query attention, one kv head for four query heads: the
// query heads split (two a rank), the kv heads cannot and stay replicated.
// CHECK-LABEL: func.func @microbatch
// CHECK: %[[Q:.*]] = graph.param "q" {{.*}}{dist.global_shape = array<i64: 8, 8>, dist.split_dim = 1 : i64} : tensor<8x4xf32>
// CHECK: graph.param "k" normal(2.000000e-02) : tensor<8x2xf32>
// CHECK: graph.param "v" normal(2.000000e-02) : tensor<8x2xf32>
// CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, dist.query_heads_split, group_size = 4 : i64} : (tensor<1x4x2x2xf32>, tensor<1x4x1x2xf32>, tensor<1x4x1x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x2x4xf32>)
// CHECK: graph.param "o" {{.*}}{dist.global_shape = array<i64: 8, 8>, dist.split_dim = 0 : i64} : tensor<4x8xf32>
// CHECK: graph.attention_grad {{.*}} {causal, dist.query_heads_split, graph.backward_layer = {{.*}}, group_size = 4 : i64
// Each rank's query heads contribute to the replicated kv heads' gradients:
// summed across ranks before the update.
// CHECK-LABEL: func.func @optimizer
// CHECK: %[[K:.*]] = graph.grad "k" : tensor<8x2xf32>
// CHECK-NEXT: shard.all_reduce %[[K]] on @mesh grid_axes = [0]
// CHECK: %[[V:.*]] = graph.grad "v" : tensor<8x2xf32>
// CHECK-NEXT: shard.all_reduce %[[V]] on @mesh grid_axes = [0]
module {
func.func @model(%x: tensor<1x4x8xf32>, %t: tensor<1x4xi32>) -> tensor<f32> {
  %b0 = graph.layer_boundary 0 %x : tensor<1x4x8xf32>
  %wq = graph.param "q" normal(2.000000e-02) : tensor<8x8xf32>
  %wk = graph.param "k" normal(2.000000e-02) : tensor<8x2xf32>
  %wv = graph.param "v" normal(2.000000e-02) : tensor<8x2xf32>
  %mq = graph.matmul %b0, %wq : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %mk = graph.matmul %b0, %wk : (tensor<1x4x8xf32>, tensor<8x2xf32>) -> tensor<1x4x2xf32>
  %mv = graph.matmul %b0, %wv : (tensor<1x4x8xf32>, tensor<8x2xf32>) -> tensor<1x4x2xf32>
  %q = graph.reshape %mq : tensor<1x4x8xf32> -> tensor<1x4x4x2xf32>
  %k = graph.reshape %mk : tensor<1x4x2xf32> -> tensor<1x4x1x2xf32>
  %v = graph.reshape %mv : tensor<1x4x2xf32> -> tensor<1x4x1x2xf32>
  %a, %lse = graph.attention %q, %k, %v {causal} : (tensor<1x4x4x2xf32>, tensor<1x4x1x2xf32>, tensor<1x4x1x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4xf32>)
  %flat = graph.reshape %a : tensor<1x4x4x2xf32> -> tensor<1x4x8xf32>
  %wo = graph.param "o" normal(2.000000e-02) : tensor<8x8xf32>
  %o = graph.matmul %flat, %wo : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %r = graph.add %b0, %o : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %b1 = graph.layer_boundary 1 %r : tensor<1x4x8xf32>
  %loss = graph.cross_entropy %b1, %t : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}

// -----

// Rules 3 and 4: two kv heads divide among two ranks and split; rope keeps
// the head split of both, with no collective.
// CHECK-LABEL: func.func @microbatch
// CHECK: graph.param "k" {{.*}}{dist.global_shape = array<i64: 8, 4>, dist.split_dim = 1 : i64} : tensor<8x2xf32>
// CHECK: %[[QR:.*]] = graph.rope %{{.*}} : tensor<1x4x2x2xf32>
// CHECK-NEXT: %[[KR:.*]] = graph.rope %{{.*}} : tensor<1x4x1x2xf32>
// CHECK-NEXT: graph.attention %[[QR]], %[[KR]], %{{.*}} {causal} :
// CHECK-NOT: shard.
// CHECK: shard.all_reduce
module {
func.func @model(%x: tensor<1x4x8xf32>, %t: tensor<1x4xi32>) -> tensor<f32> {
  %b0 = graph.layer_boundary 0 %x : tensor<1x4x8xf32>
  %wq = graph.param "q" normal(2.000000e-02) : tensor<8x8xf32>
  %wk = graph.param "k" normal(2.000000e-02) : tensor<8x4xf32>
  %mq = graph.matmul %b0, %wq : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %mk = graph.matmul %b0, %wk : (tensor<1x4x8xf32>, tensor<8x4xf32>) -> tensor<1x4x4xf32>
  %q = graph.reshape %mq : tensor<1x4x8xf32> -> tensor<1x4x4x2xf32>
  %k = graph.reshape %mk : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %qr = graph.rope %q : tensor<1x4x4x2xf32>
  %kr = graph.rope %k : tensor<1x4x2x2xf32>
  %a, %lse = graph.attention %qr, %kr, %k {causal} : (tensor<1x4x4x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4xf32>)
  %flat = graph.reshape %a : tensor<1x4x4x2xf32> -> tensor<1x4x8xf32>
  %wo = graph.param "o" normal(2.000000e-02) : tensor<8x8xf32>
  %o = graph.matmul %flat, %wo : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %b1 = graph.layer_boundary 1 %o : tensor<1x4x8xf32>
  %loss = graph.cross_entropy %b1, %t : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}

// -----

// Rule 5, sequence parallelism (the SP run): the embedding's sum is
// reduce-scattered along the sequence, the norm runs on its shard, the
// column-parallel matmul all-gathers its input and the row-parallel one
// reduce-scatters its output; the loss, on the whole sequence, gathers it.
// SP-LABEL: graph.param "tok"
// SP-NEXT: %[[X:.*]] = graph.embedding
// SP-NEXT: %[[RS:.*]] = shard.reduce_scatter %[[X]] on @mesh grid_axes = [0] scatter_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// SP: %[[N:.*]] = graph.layer_norm %{{.*}} : (tensor<2x2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x2x8xf32>
// SP: %[[AG:.*]] = shard.all_gather %[[N]] on @mesh grid_axes = [0] gather_axis = 1 : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// SP-NEXT: graph.matmul %[[AG]]
// SP: %[[M2:.*]] = graph.matmul
// SP-NEXT: shard.reduce_scatter %[[M2]] on @mesh grid_axes = [0] scatter_axis = 1
// SP-NOT: shard.all_reduce
// SP: shard.all_gather %{{.*}} gather_axis = 1
// SP-NEXT: graph.cross_entropy
// Backward: the mirror image (reduce-scatter after the column-parallel
// matmul's input gradient, all-gather before the embedding's).
// SP: shard.reduce_scatter %{{.*}} scatter_axis = 1 {graph.backward_layer = 0 : i64}
// SP-NEXT: graph.layer_norm_grad
// SP: shard.all_gather %{{.*}} gather_axis = 1 {graph.backward_layer = -1 : i64}
// SP-NEXT: graph.embedding_grad
// SP-NOT: shard.all_reduce
// The norm's parameters are replicated but each rank saw part of the
// sequence: their gradients are all-reduced.
// SP-LABEL: func.func @optimizer
// SP: %[[LW:.*]] = graph.grad "ln.weight"
// SP-NEXT: shard.all_reduce %[[LW]] on @mesh grid_axes = [0]
// SP: %[[LB:.*]] = graph.grad "ln.bias"
// SP-NEXT: shard.all_reduce %[[LB]] on @mesh grid_axes = [0]
// Without it, the embedding's sum is all-reduced whole.
// CHECK-LABEL: graph.param "tok"
// CHECK-NEXT: graph.embedding
// CHECK-NEXT: shard.all_reduce
// CHECK-NOT: shard.reduce_scatter
// CHECK: return
module {
func.func @model(%t: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> tensor<f32> {
  %e = graph.param "tok" normal(2.000000e-02) : tensor<32x8xf32>
  %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %b0 = graph.layer_boundary 0 %x : tensor<2x4x8xf32>
  %lw = graph.param "ln.weight" ones : tensor<8xf32>
  %lb = graph.param "ln.bias" zeros : tensor<8xf32>
  %n = graph.layer_norm %b0, %lw, %lb {epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %w1 = graph.param "up" normal(2.000000e-02) : tensor<8x16xf32>
  %m1 = graph.matmul %n, %w1 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %g = graph.gelu %m1 : tensor<2x4x16xf32>
  %w2 = graph.param "down" normal(2.000000e-02) : tensor<16x8xf32>
  %m2 = graph.matmul %g, %w2 : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %r = graph.add %b0, %m2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %b1 = graph.layer_boundary 1 %r : tensor<2x4x8xf32>
  %loss = graph.cross_entropy %b1, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}

// -----

// Rule 7: a vocabulary that does not divide (strata-compile pads it first).
module {
func.func @model(%t: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> tensor<f32> {
  %e = graph.param "wte" normal(2.000000e-02) : tensor<31x8xf32>
  // expected-error @below {{tensor parallelism (size 2): the table f32[31, 8] has 31 rows, not divisible by tensor-parallel size 2 (run --strata-pad-vocab first)}}
  %x = graph.embedding %e, %t : (tensor<31x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %b0 = graph.layer_boundary 0 %x : tensor<2x4x8xf32>
  %l = graph.matmul %b0, %e {transpose_b} : (tensor<2x4x8xf32>, tensor<31x8xf32>) -> tensor<2x4x31xf32>
  %loss = graph.cross_entropy %l, %y : (tensor<2x4x31xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}

// -----

// Rule 7: a column-parallel weight whose columns do not divide.
module {
func.func @model(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %b0 = graph.layer_boundary 0 %x : tensor<2x4x8xf32>
  %w1 = graph.param "fc1" normal(2.000000e-02) : tensor<8x15xf32>
  %c1 = graph.param "fc1.bias" zeros : tensor<15xf32>
  // expected-error @below {{tensor parallelism (size 2): parameter 'fc1' f32[8, 15]: dimension 1 (15) must split across ranks, and is not divisible by tensor-parallel size 2}}
  %m1 = graph.matmul %b0, %w1 : (tensor<2x4x8xf32>, tensor<8x15xf32>) -> tensor<2x4x15xf32>
  %a1 = graph.add %m1, %c1 : tensor<2x4x15xf32>, tensor<15xf32>
  %g = graph.gelu %a1 : tensor<2x4x15xf32>
  %w2 = graph.param "fc2" normal(2.000000e-02) : tensor<15x8xf32>
  %c2 = graph.param "fc2.bias" zeros : tensor<8xf32>
  %m2 = graph.matmul %g, %w2 : (tensor<2x4x15xf32>, tensor<15x8xf32>) -> tensor<2x4x8xf32>
  %a2 = graph.add %m2, %c2 : tensor<2x4x8xf32>, tensor<8xf32>
  %r = graph.add %b0, %a2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %b1 = graph.layer_boundary 1 %r : tensor<2x4x8xf32>
  %loss = graph.cross_entropy %b1, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}

// -----

// Rule 7: three query heads cannot split in two; the error names the reshape
// that cannot carry the split, with a note at the matmul it comes from.
module {
func.func @model(%x: tensor<1x4x6xf32>, %t: tensor<1x4xi32>) -> tensor<f32> {
  %wq = graph.param "q" normal(2.000000e-02) : tensor<6x6xf32>
  // expected-note @below {{the matmul it comes from}}
  %mq = graph.matmul %x, %wq : (tensor<1x4x6xf32>, tensor<6x6xf32>) -> tensor<1x4x6xf32>
  // expected-error @below {{tensor parallelism (size 2): the output of 'q' must split across ranks, but the reshape to f32[1, 4, 3, 2] cannot carry the split: its dimension 2 (3) is not divisible by tensor-parallel size 2}}
  %q = graph.reshape %mq : tensor<1x4x6xf32> -> tensor<1x4x3x2xf32>
  %a, %lse = graph.attention %q, %q, %q {causal} : (tensor<1x4x3x2xf32>, tensor<1x4x3x2xf32>, tensor<1x4x3x2xf32>) -> (tensor<1x4x3x2xf32>, tensor<1x3x4xf32>)
  %flat = graph.reshape %a : tensor<1x4x3x2xf32> -> tensor<1x4x6xf32>
  %loss = graph.cross_entropy %flat, %t : (tensor<1x4x6xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}
