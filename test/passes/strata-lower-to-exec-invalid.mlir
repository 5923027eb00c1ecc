// What the exec lowering refuses in the decisions the passes before it
// leave (dist.buckets from --strata-layout-optimizer-state, the epilogue
// marks from --strata-fuse-epilogues): each inconsistency is an error at
// the op that carries it, never a plan that drops a parameter or an op.
// RUN: strata-opt %s --split-input-file --strata-lower-to-exec --verify-diagnostics

// No layout: the optimizer-state layout pass has not run.
module {
  shard.grid @mesh(shape = 1x1x1)
  func.func @microbatch() -> tensor<f32> {
    %t = graph.input "tokens" : tensor<2x4xi32>
    %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
    %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = graph.param "w" normal(2.000000e-02) : tensor<8x32xf32>
    %b = graph.param "b" zeros : tensor<32xf32>
    %p = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %a = graph.add %p, %b : tensor<2x4x32xf32>, tensor<32xf32>
    %l = graph.cross_entropy %a, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> tensor<f32> {
    %0 = graph.grad "w" : tensor<8x32xf32>
    %1 = graph.sum_squares %0 : tensor<8x32xf32>
    %norm, %coefficient = graph.clip_coefficient %1
    graph.adamw "w", %0, %coefficient {weight_decay} : tensor<8x32xf32>
    return %norm : tensor<f32>
  }
  // expected-error @+1 {{has no dist.buckets: run --strata-layout-optimizer-state before the lowering}}
  dist.schedule stage 0 microbatches 1 {
    dist.step @microbatch microbatch 0
    dist.step @optimizer
  }
}

// -----

// A bucket naming what is no parameter of the stage.
module {
  shard.grid @mesh(shape = 1x1x1)
  func.func @microbatch() -> tensor<f32> {
    %t = graph.input "tokens" : tensor<2x4xi32>
    %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
    %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = graph.param "w" normal(2.000000e-02) : tensor<8x32xf32>
    %b = graph.param "b" zeros : tensor<32xf32>
    %p = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %a = graph.add %p, %b : tensor<2x4x32xf32>, tensor<32xf32>
    %l = graph.cross_entropy %a, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> tensor<f32> {
    %0 = graph.grad "w" : tensor<8x32xf32>
    %1 = graph.sum_squares %0 : tensor<8x32xf32>
    %norm, %coefficient = graph.clip_coefficient %1
    graph.adamw "w", %0, %coefficient {weight_decay} : tensor<8x32xf32>
    return %norm : tensor<f32>
  }
  // expected-error @+1 {{lays out "v", which is no parameter of the stage}}
  dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [{chunk = 0 : i64, params = ["e", "w", "b", "v"]}]} {
    dist.step @microbatch microbatch 0
    dist.step @optimizer
  }
}

// -----

// A parameter in two buckets.
module {
  shard.grid @mesh(shape = 1x1x1)
  func.func @microbatch() -> tensor<f32> {
    %t = graph.input "tokens" : tensor<2x4xi32>
    %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
    %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = graph.param "w" normal(2.000000e-02) : tensor<8x32xf32>
    %b = graph.param "b" zeros : tensor<32xf32>
    %p = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %a = graph.add %p, %b : tensor<2x4x32xf32>, tensor<32xf32>
    %l = graph.cross_entropy %a, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> tensor<f32> {
    %0 = graph.grad "w" : tensor<8x32xf32>
    %1 = graph.sum_squares %0 : tensor<8x32xf32>
    %norm, %coefficient = graph.clip_coefficient %1
    graph.adamw "w", %0, %coefficient {weight_decay} : tensor<8x32xf32>
    return %norm : tensor<f32>
  }
  // expected-error @+1 {{lays out "w" twice}}
  dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [{chunk = 0 : i64, params = ["e", "w"]}, {chunk = 0 : i64, params = ["w", "b"]}]} {
    dist.step @microbatch microbatch 0
    dist.step @optimizer
  }
}

// -----

// A parameter in none.
module {
  shard.grid @mesh(shape = 1x1x1)
  func.func @microbatch() -> tensor<f32> {
    %t = graph.input "tokens" : tensor<2x4xi32>
    %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
    %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = graph.param "w" normal(2.000000e-02) : tensor<8x32xf32>
    %b = graph.param "b" zeros : tensor<32xf32>
    %p = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %a = graph.add %p, %b : tensor<2x4x32xf32>, tensor<32xf32>
    %l = graph.cross_entropy %a, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> tensor<f32> {
    %0 = graph.grad "w" : tensor<8x32xf32>
    %1 = graph.sum_squares %0 : tensor<8x32xf32>
    %norm, %coefficient = graph.clip_coefficient %1
    graph.adamw "w", %0, %coefficient {weight_decay} : tensor<8x32xf32>
    return %norm : tensor<f32>
  }
  // expected-error @+1 {{lays out no bucket for parameter 'b'}}
  dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [{chunk = 0 : i64, params = ["e", "w"]}]} {
    dist.step @microbatch microbatch 0
    dist.step @optimizer
  }
}

// -----

// A bucket that is not {chunk, params}.
module {
  shard.grid @mesh(shape = 1x1x1)
  func.func @microbatch() -> tensor<f32> {
    %t = graph.input "tokens" : tensor<2x4xi32>
    %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
    %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = graph.param "w" normal(2.000000e-02) : tensor<8x32xf32>
    %b = graph.param "b" zeros : tensor<32xf32>
    %p = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %a = graph.add %p, %b : tensor<2x4x32xf32>, tensor<32xf32>
    %l = graph.cross_entropy %a, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> tensor<f32> {
    %0 = graph.grad "w" : tensor<8x32xf32>
    %1 = graph.sum_squares %0 : tensor<8x32xf32>
    %norm, %coefficient = graph.clip_coefficient %1
    graph.adamw "w", %0, %coefficient {weight_decay} : tensor<8x32xf32>
    return %norm : tensor<f32>
  }
  // expected-error @+1 {{has a dist.buckets entry that is not {chunk, params}}}
  dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [["e", "w", "b"]]} {
    dist.step @microbatch microbatch 0
    dist.step @optimizer
  }
}

// -----

// An epilogue whose absorbed op is not marked: a gelu_bias gemm without
// its GELU.
module {
  shard.grid @mesh(shape = 1x1x1)
  func.func @microbatch() -> tensor<f32> {
    %t = graph.input "tokens" : tensor<2x4xi32>
    %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
    %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = graph.param "w" normal(2.000000e-02) : tensor<8x32xf32>
    %b = graph.param "b" zeros : tensor<32xf32>
    // expected-error @+1 {{is marked with a gemm epilogue whose bias add or GELU is not one it computes, absorbed}}
    %p = graph.matmul %x, %w {exec.epilogue = "gelu_bias"} : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %a = graph.add %p, %b {exec.absorbed} : tensor<2x4x32xf32>, tensor<32xf32>
    %h = graph.gelu %a : tensor<2x4x32xf32>
    %l = graph.cross_entropy %h, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> tensor<f32> {
    %0 = graph.grad "w" : tensor<8x32xf32>
    %1 = graph.sum_squares %0 : tensor<8x32xf32>
    %norm, %coefficient = graph.clip_coefficient %1
    graph.adamw "w", %0, %coefficient {weight_decay} : tensor<8x32xf32>
    return %norm : tensor<f32>
  }
  dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [{chunk = 0 : i64, params = ["e", "w", "b"]}]} {
    dist.step @microbatch microbatch 0
    dist.step @optimizer
  }
}

// -----

// An epilogue name the gemm of a product cannot have.
module {
  shard.grid @mesh(shape = 1x1x1)
  func.func @microbatch() -> tensor<f32> {
    %t = graph.input "tokens" : tensor<2x4xi32>
    %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
    %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = graph.param "w" normal(2.000000e-02) : tensor<8x32xf32>
    %b = graph.param "b" zeros : tensor<32xf32>
    // expected-error @+1 {{is marked with an epilogue a product's gemm cannot have}}
    %p = graph.matmul %x, %w {exec.epilogue = "bias_grad"} : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %a = graph.add %p, %b : tensor<2x4x32xf32>, tensor<32xf32>
    %l = graph.cross_entropy %a, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> tensor<f32> {
    %0 = graph.grad "w" : tensor<8x32xf32>
    %1 = graph.sum_squares %0 : tensor<8x32xf32>
    %norm, %coefficient = graph.clip_coefficient %1
    graph.adamw "w", %0, %coefficient {weight_decay} : tensor<8x32xf32>
    return %norm : tensor<f32>
  }
  dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [{chunk = 0 : i64, params = ["e", "w", "b"]}]} {
    dist.step @microbatch microbatch 0
    dist.step @optimizer
  }
}

// -----

// A bias mark on an add that is no bias: a whole tensor added.
module {
  shard.grid @mesh(shape = 1x1x1)
  func.func @microbatch() -> tensor<f32> {
    %t = graph.input "tokens" : tensor<2x4xi32>
    %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
    %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = graph.param "w" normal(2.000000e-02) : tensor<8x32xf32>
    %b = graph.param "b" zeros : tensor<32xf32>
    // expected-error @+1 {{is marked with a gemm epilogue whose bias add or GELU is not one it computes, absorbed}}
    %p = graph.matmul %x, %w {exec.epilogue = "bias"} : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %q = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %a = graph.add %p, %q {exec.absorbed} : tensor<2x4x32xf32>, tensor<2x4x32xf32>
    %l = graph.cross_entropy %a, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> tensor<f32> {
    %0 = graph.grad "w" : tensor<8x32xf32>
    %1 = graph.sum_squares %0 : tensor<8x32xf32>
    %norm, %coefficient = graph.clip_coefficient %1
    graph.adamw "w", %0, %coefficient {weight_decay} : tensor<8x32xf32>
    return %norm : tensor<f32>
  }
  dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [{chunk = 0 : i64, params = ["e", "w", "b"]}]} {
    dist.step @microbatch microbatch 0
    dist.step @optimizer
  }
}

// -----

// A bias-gradient mark with no bias gradient beside it.
module {
  shard.grid @mesh(shape = 1x1x1)
  func.func @microbatch() -> tensor<f32> {
    %t = graph.input "tokens" : tensor<2x4xi32>
    %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
    %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = graph.param "w" normal(2.000000e-02) : tensor<8x32xf32>
    %b = graph.param "b" zeros : tensor<32xf32>
    %p = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %a = graph.add %p, %b : tensor<2x4x32xf32>, tensor<32xf32>
    // expected-error @+1 {{is marked to sum a bias gradient beside it that is not one its gemm computes, accumulating into a parameter}}
    %dw = graph.matmul_weight_grad %x, %a {exec.epilogue = "bias_grad"} : (tensor<2x4x8xf32>, tensor<2x4x32xf32>) -> tensor<8x32xf32>
    graph.accumulate_grad "w", %dw : tensor<8x32xf32>
    %l = graph.cross_entropy %a, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> tensor<f32> {
    %0 = graph.grad "w" : tensor<8x32xf32>
    %1 = graph.sum_squares %0 : tensor<8x32xf32>
    %norm, %coefficient = graph.clip_coefficient %1
    graph.adamw "w", %0, %coefficient {weight_decay} : tensor<8x32xf32>
    return %norm : tensor<f32>
  }
  dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [{chunk = 0 : i64, params = ["e", "w", "b"]}]} {
    dist.step @microbatch microbatch 0
    dist.step @optimizer
  }
}

// -----

// An add marked absorbed whose matmul has no epilogue: it would be
// dropped.
module {
  shard.grid @mesh(shape = 1x1x1)
  func.func @microbatch() -> tensor<f32> {
    %t = graph.input "tokens" : tensor<2x4xi32>
    %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
    %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = graph.param "w" normal(2.000000e-02) : tensor<8x32xf32>
    %b = graph.param "b" zeros : tensor<32xf32>
    %p = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    // expected-error @+1 {{is marked absorbed, but no gemm's epilogue does it}}
    %a = graph.add %p, %b {exec.absorbed} : tensor<2x4x32xf32>, tensor<32xf32>
    %l = graph.cross_entropy %a, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> tensor<f32> {
    %0 = graph.grad "w" : tensor<8x32xf32>
    %1 = graph.sum_squares %0 : tensor<8x32xf32>
    %norm, %coefficient = graph.clip_coefficient %1
    graph.adamw "w", %0, %coefficient {weight_decay} : tensor<8x32xf32>
    return %norm : tensor<f32>
  }
  dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [{chunk = 0 : i64, params = ["e", "w", "b"]}]} {
    dist.step @microbatch microbatch 0
    dist.step @optimizer
  }
}

// -----

// A bias gradient marked absorbed beside no weight gradient: it would
// never accumulate.
module {
  shard.grid @mesh(shape = 1x1x1)
  func.func @microbatch() -> tensor<f32> {
    %t = graph.input "tokens" : tensor<2x4xi32>
    %e = graph.param "e" normal(2.000000e-02) : tensor<32x8xf32>
    %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = graph.param "w" normal(2.000000e-02) : tensor<8x32xf32>
    %b = graph.param "b" zeros : tensor<32xf32>
    %p = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
    %a = graph.add %p, %b : tensor<2x4x32xf32>, tensor<32xf32>
    // expected-error @+1 {{is marked absorbed, but no gemm's epilogue does it}}
    %db = graph.sum_to %a {exec.absorbed} : tensor<2x4x32xf32> -> tensor<32xf32>
    graph.accumulate_grad "b", %db {exec.absorbed} : tensor<32xf32>
    %l = graph.cross_entropy %a, %t : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> tensor<f32> {
    %0 = graph.grad "w" : tensor<8x32xf32>
    %1 = graph.sum_squares %0 : tensor<8x32xf32>
    %norm, %coefficient = graph.clip_coefficient %1
    graph.adamw "w", %0, %coefficient {weight_decay} : tensor<8x32xf32>
    return %norm : tensor<f32>
  }
  dist.schedule stage 0 microbatches 1 attributes {dist.buckets = [{chunk = 0 : i64, params = ["e", "w", "b"]}]} {
    dist.step @microbatch microbatch 0
    dist.step @optimizer
  }
}
