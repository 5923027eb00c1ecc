// Every verifier error of the graph dialect, with its message.
// RUN: strata-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{needs a non-empty name}}
%0 = graph.param "" ones : tensor<4xf32>

// -----

// expected-error @+1 {{normal initialization needs a std}}
%0 = graph.param "w" normal : tensor<4xf32>

// -----

// expected-error @+1 {{only normal initialization takes a std}}
%0 = graph.param "w" zeros(1.0) : tensor<4xf32>

// -----

// expected-error @+1 {{std must be positive and finite, got -0.5}}
%0 = graph.param "w" normal(-0.5) : tensor<4xf32>

// -----

// expected-error @+1 {{has no elements: f32[0, 4]}}
%0 = graph.param "w" ones : tensor<0x4xf32>

// -----

// expected-error @+1 {{needs a non-empty name}}
%0 = graph.input "" : tensor<2x4xi32>

// -----

// expected-error @+1 {{must be ranked tensor of 32-bit signless integer values}}
%0 = graph.input "tokens" : tensor<2x4xf32>

// -----

func.func @embedding_table_rank(%t: tensor<32xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+1 {{the table must be [vocab, hidden], got f32[32]}}
  %0 = graph.embedding %t, %ids : (tensor<32xf32>, tensor<2x4xi32>) -> tensor<2x4x32xf32>
  return
}

// -----

func.func @embedding_result(%t: tensor<32x8xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+1 {{result f32[2, 4, 32] does not match the inferred f32[2, 4, 8]}}
  %0 = graph.embedding %t, %ids : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x32xf32>
  return
}

// -----

func.func @matmul_contracting(%a: tensor<2x4x8xf32>, %w: tensor<16x32xf32>) {
  // expected-error @+1 {{contracting dimensions differ: f32[2, 4, 8] has 8, f32[16, 32] has 16}}
  %0 = graph.matmul %a, %w : (tensor<2x4x8xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  return
}

// -----

func.func @matmul_contracting_transposed(%a: tensor<2x4x8xf32>, %w: tensor<8x32xf32>) {
  // expected-error @+1 {{contracting dimensions differ: f32[2, 4, 8] has 8, f32[8, 32] (transposed) has 32}}
  %0 = graph.matmul %a, %w {transpose_b} : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<2x4x8xf32>, %w: tensor<2x8x32xf32>) {
  // expected-error @+1 {{the right operand must be a rank-2 weight, got f32[2, 8, 32]}}
  %0 = graph.matmul %a, %w : (tensor<2x4x8xf32>, tensor<2x8x32xf32>) -> tensor<2x4x32xf32>
  return
}

// -----

func.func @matmul_dtypes(%a: tensor<4x8xf32>, %w: tensor<8x32xbf16>) {
  // expected-error @+1 {{operands have different element types: f32[4, 8] and bf16[8, 32]}}
  %0 = graph.matmul %a, %w : (tensor<4x8xf32>, tensor<8x32xbf16>) -> tensor<4x32xf32>
  return
}

// -----

func.func @matmul_result(%a: tensor<4x8xf32>, %w: tensor<8x32xf32>) {
  // expected-error @+1 {{result f32[4, 16] does not match the inferred f32[4, 32]}}
  %0 = graph.matmul %a, %w : (tensor<4x8xf32>, tensor<8x32xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @broadcast(%a: tensor<2x4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{f32[4] does not broadcast to f32[2, 4, 8]: the right shape must equal the left or a suffix of it}}
  %0 = graph.add %a, %b : tensor<2x4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @broadcast_dtypes(%a: tensor<4x8xf32>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{operands have different element types}}
  %0 = graph.mul %a, %b : tensor<4x8xf32>, tensor<8xbf16>
  return
}

// -----

func.func @layer_norm_weight(%x: tensor<2x8xf32>, %w: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{the weight must be [8], the last dimension of f32[2, 8], got f32[4]}}
  %0 = graph.layer_norm %x, %w, %b {epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{the bias must be [8], the last dimension of f32[2, 8], got f32[2, 8]}}
  %0 = graph.layer_norm %x, %w, %b {epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %0 = graph.layer_norm %x, %w, %w {epsilon = 0.0 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<2x8xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{the weight must be [8], the last dimension of f32[2, 8], got f32[16]}}
  %0 = graph.rms_norm %x, %w {epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<16xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_epsilon(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %0 = graph.rms_norm %x, %w {epsilon = -1.0 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{cannot reshape f32[2, 8] (16 elements) to [3, 5] (15 elements)}}
  %0 = graph.reshape %x : tensor<2x8xf32> -> tensor<3x5xf32>
  return
}

// -----

func.func @transpose_permutation(%x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{[0, 0, 1] is not a permutation of the 3 dimensions of f32[2, 8, 4]}}
  %0 = graph.transpose %x [0, 0, 1] : tensor<2x8x4xf32> -> tensor<2x2x8xf32>
  return
}

// -----

func.func @transpose_result(%x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{result f32[2, 8, 4] does not match the inferred f32[2, 4, 8]}}
  %0 = graph.transpose %x [0, 2, 1] : tensor<2x8x4xf32> -> tensor<2x8x4xf32>
  return
}

// -----

func.func @rope_rank(%x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{the input must be [batch, seq, heads, head_dim], got f32[2, 8, 4]}}
  %0 = graph.rope %x : tensor<2x8x4xf32>
  return
}

// -----

func.func @rope_odd(%x: tensor<2x8x4x5xf32>) {
  // expected-error @+1 {{head_dim 5 must be even to rotate pairs}}
  %0 = graph.rope %x : tensor<2x8x4x5xf32>
  return
}

// -----

func.func @rope_base(%x: tensor<2x8x4x4xf32>) {
  // expected-error @+1 {{base must be greater than 1, got 1}}
  %0 = graph.rope %x {base = 1.0 : f64} : tensor<2x8x4x4xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{the query must be [batch, seq, heads, head_dim], got f32[2, 8, 16]}}
  %0:2 = graph.attention %q, %q, %q : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<1xf32>)
  return
}

// -----

func.func @attention_key_value(%q: tensor<2x8x4x4xf32>, %k: tensor<2x8x2x4xf32>, %v: tensor<2x8x4x4xf32>) {
  // expected-error @+1 {{the key f32[2, 8, 2, 4] and the value f32[2, 8, 4, 4] must have the same shape}}
  %0:2 = graph.attention %q, %k, %v : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_batch(%q: tensor<2x8x4x4xf32>, %k: tensor<1x8x4x4xf32>) {
  // expected-error @+1 {{batch differs: the query f32[2, 8, 4, 4], the key f32[1, 8, 4, 4]}}
  %0:2 = graph.attention %q, %k, %k : (tensor<2x8x4x4xf32>, tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_head_dim(%q: tensor<2x8x4x4xf32>, %k: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{head_dim differs: the query f32[2, 8, 4, 4], the key f32[2, 8, 4, 8]}}
  %0:2 = graph.attention %q, %k, %k : (tensor<2x8x4x4xf32>, tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_groups(%q: tensor<2x8x6x4xf32>, %k: tensor<2x8x4x4xf32>) {
  // expected-error @+1 {{query heads 6 are not a multiple of key/value heads 4}}
  %0:2 = graph.attention %q, %k, %k : (tensor<2x8x6x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> (tensor<2x8x6x4xf32>, tensor<2x6x8xf32>)
  return
}

// -----

func.func @attention_causal_lengths(%q: tensor<2x8x4x4xf32>, %k: tensor<2x16x4x4xf32>) {
  // expected-error @+1 {{causal attention needs equal query and key lengths, got 8 and 16}}
  %0:2 = graph.attention %q, %k, %k {causal} : (tensor<2x8x4x4xf32>, tensor<2x16x4x4xf32>, tensor<2x16x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @cross_entropy_labels(%logits: tensor<2x8x32xf32>, %labels: tensor<2x4xi32>) {
  // expected-error @+1 {{the labels i32[2, 4] must have the shape of the logits f32[2, 8, 32] without the last (vocabulary) dimension}}
  %0 = graph.cross_entropy %logits, %labels : (tensor<2x8x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return
}

// -----

func.func @layer_boundary_empty() {
  // expected-error @+1 {{must carry at least one value into the layer}}
  "graph.layer_boundary"() <{index = 0 : i64}> : () -> ()
  return
}

// -----

func.func @layer_boundary_index(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{index must be >= 0, got -1}}
  %0 = graph.layer_boundary -1 %x : tensor<2x8xf32>
  return
}

// -----

func.func @attention_lse(%q: tensor<2x8x4x4xf32>) {
  // expected-error @+1 {{the log-sum-exp must be f32[2, 4, 8], got f32[2, 8, 4]}}
  %0:2 = graph.attention %q, %q, %q : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4xf32>)
  return
}

// -----

// Unfused, attention keeps its probabilities [batch, heads, seq, keys].
func.func @attention_probabilities(%q: tensor<2x8x4x4xf32>) {
  // expected-error @+1 {{the probabilities must be f32[2, 4, 8, 8], got f32[2, 4, 8]}}
  %0:2 = graph.attention %q, %q, %q {unfused} : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_unfused_groups(%q: tensor<2x8x4x4xf32>, %k: tensor<2x8x2x4xf32>) {
  // expected-error @+1 {{unfused attention needs as many key/value heads as query heads, got 2 key/value heads for 4 query heads}}
  %0:2 = graph.attention %q, %k, %k {unfused} : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8x8xf32>)
  return
}
