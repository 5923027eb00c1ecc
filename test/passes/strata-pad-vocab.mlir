// Vocabulary padding's rules (Megatron's --make-vocab-size-divisible-by):
//   1. An embedding table's rows and the output layer's vocabulary
//      (columns, or rows of a tied table read transposed) grow to the next
//      multiple of divisible-by x tensor-parallel; the parameter records its
//      real shape in dist.real_shape, and a table shared by both is padded
//      once.
//   2. The cross-entropy learns the real vocabulary (vocab_size), so the
//      padding stays out of its softmax and the loss is the unpadded one.
//   3. What is already a multiple is left alone.
//   4. Logits that come from no parameter's matmul cannot be padded: left
//      alone if they split across tensor-parallel ranks as they are, an
//      error if they do not.
// RUN: strata-opt %s --split-input-file --strata-pad-vocab="tensor-parallel=2 divisible-by=8" --verify-diagnostics | FileCheck %s
// RUN: not strata-opt %s --split-input-file --strata-pad-vocab=divisible-by=0 2>&1 | FileCheck %s --check-prefix=OPTION

// OPTION: error: tensor-parallel and divisible-by must be positive

// Rule 1 and 2, a tied table: 50 rows become 64 (a multiple of 8 x 2).
// CHECK-LABEL: func.func @model
// CHECK: %[[E:.*]] = graph.param "wte" normal(2.000000e-02) {dist.real_shape = array<i64: 50, 8>} : tensor<64x8xf32>
// CHECK: graph.embedding %[[E]], %{{.*}} : (tensor<64x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
// CHECK: %[[L:.*]] = graph.matmul %{{.*}}, %[[E]] {transpose_b} : (tensor<2x4x8xf32>, tensor<64x8xf32>) -> tensor<2x4x64xf32>
// CHECK: graph.cross_entropy %[[L]], %{{.*}} {vocab_size = 50 : i64} : (tensor<2x4x64xf32>, tensor<2x4xi32>) -> tensor<f32>
func.func @model(%t: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> tensor<f32> {
  %e = graph.param "wte" normal(2.000000e-02) : tensor<50x8xf32>
  %x = graph.embedding %e, %t : (tensor<50x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = graph.matmul %x, %e {transpose_b} : (tensor<2x4x8xf32>, tensor<50x8xf32>) -> tensor<2x4x50xf32>
  %loss = graph.cross_entropy %l, %y : (tensor<2x4x50xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Rule 1, an untied output layer [hidden, vocab]: its columns grow.
// CHECK-LABEL: func.func @model
// CHECK: graph.param "embed" normal(2.000000e-02) {dist.real_shape = array<i64: 20, 8>} : tensor<32x8xf32>
// CHECK: %[[W:.*]] = graph.param "output" normal(2.000000e-02) {dist.real_shape = array<i64: 8, 20>} : tensor<8x32xf32>
// CHECK: graph.matmul %{{.*}}, %[[W]] : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
// CHECK: graph.cross_entropy {{.*}} {vocab_size = 20 : i64}
func.func @model(%t: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> tensor<f32> {
  %e = graph.param "embed" normal(2.000000e-02) : tensor<20x8xf32>
  %x = graph.embedding %e, %t : (tensor<20x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %w = graph.param "output" normal(2.000000e-02) : tensor<8x20xf32>
  %l = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x20xf32>) -> tensor<2x4x20xf32>
  %loss = graph.cross_entropy %l, %y : (tensor<2x4x20xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Rule 3: 32 is a multiple of 16 already.
// CHECK-LABEL: func.func @model
// CHECK-NOT: dist.real_shape
// CHECK-NOT: vocab_size
// CHECK: return
func.func @model(%t: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> tensor<f32> {
  %e = graph.param "wte" normal(2.000000e-02) : tensor<32x8xf32>
  %x = graph.embedding %e, %t : (tensor<32x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = graph.matmul %x, %e {transpose_b} : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %loss = graph.cross_entropy %l, %y : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Rule 4: logits that are a model input split in two as they are.
// CHECK-LABEL: func.func @model
// CHECK: graph.cross_entropy %arg0, %arg1 : (tensor<2x10xf32>, tensor<2xi32>) -> tensor<f32>
func.func @model(%logits: tensor<2x10xf32>, %y: tensor<2xi32>) -> tensor<f32> {
  %loss = graph.cross_entropy %logits, %y : (tensor<2x10xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Rule 4: nine columns neither split in two nor come from a parameter.
func.func @model(%logits: tensor<2x9xf32>, %y: tensor<2xi32>) -> tensor<f32> {
  // expected-error @below {{the vocabulary 9 does not split across tensor-parallel size 2, and the logits do not come straight from a matmul with a parameter, whose columns could be padded}}
  %loss = graph.cross_entropy %logits, %y : (tensor<2x9xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
