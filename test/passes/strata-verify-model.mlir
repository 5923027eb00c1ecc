// Whole-model rules for hand-written IR.
// RUN: strata-opt %s --split-input-file --strata-verify-model --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @model
func.func @model() -> tensor<f32> {
  %t = graph.input "tokens" : tensor<1x4xi32>
  %e = graph.param "wte" normal(2.000000e-02) : tensor<8x4xf32>
  %x = graph.embedding %e, %t : (tensor<8x4xf32>, tensor<1x4xi32>) -> tensor<1x4x4xf32>
  %b0 = graph.layer_boundary 0 %x : tensor<1x4x4xf32>
  %h = graph.gelu %b0 : tensor<1x4x4xf32>
  %b1 = graph.layer_boundary 1 %h : tensor<1x4x4xf32>
  %l = graph.matmul %b1, %e {transpose_b} : (tensor<1x4x4xf32>, tensor<8x4xf32>) -> tensor<1x4x8xf32>
  %loss = graph.cross_entropy %l, %t : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{a model returns one value, the f32 loss tensor<f32>}}
func.func @model(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{a model module holds exactly one function, found 2}}
module {
  func.func @a() { return }
  func.func @b() { return }
}

// -----

func.func @model(%l: tensor<1x4x8xf32>) -> tensor<f32> {
  // expected-note @+1 {{first declared here}}
  %t = graph.input "tokens" : tensor<1x4xi32>
  // expected-error @+1 {{'tokens' is declared twice}}
  %u = graph.input "tokens" : tensor<1x4xi32>
  %loss = graph.cross_entropy %l, %t : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  %loss2 = graph.cross_entropy %l, %u : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @model(%l: tensor<1x4x8xf32>, %t: tensor<1x4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'unused' is never used}}
  %w = graph.param "unused" ones : tensor<4xf32>
  %loss = graph.cross_entropy %l, %t : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @model(%x: tensor<1x4x8xf32>, %t: tensor<1x4xi32>) -> tensor<f32> {
  %b0 = graph.layer_boundary 0 %x : tensor<1x4x8xf32>
  // expected-error @+1 {{layer boundary 2 found where 1 was expected: boundaries are numbered 0..L in order}}
  %b1 = graph.layer_boundary 2 %b0 : tensor<1x4x8xf32>
  %loss = graph.cross_entropy %b1, %t : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @model(%x: tensor<1x4x8xf32>, %t: tensor<1x4xi32>) -> tensor<f32> {
  %b0 = graph.layer_boundary 0 %x : tensor<1x4x8xf32>
  %y = graph.reshape %b0 : tensor<1x4x8xf32> -> tensor<1x32xf32>
  // expected-error @+1 {{layer boundary 1 carries other types than the boundary before it: every layer of the repeated block must have the same interface}}
  %b1 = graph.layer_boundary 1 %y : tensor<1x32xf32>
  %z = graph.reshape %b1 : tensor<1x32xf32> -> tensor<1x4x8xf32>
  %loss = graph.cross_entropy %z, %t : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @model(%x: tensor<1x4x8xf32>, %t: tensor<1x4xi32>) -> tensor<f32> {
  // expected-error @+1 {{a model with layers has at least two boundaries: one entering the first layer and one leaving the last}}
  %b0 = graph.layer_boundary 0 %x : tensor<1x4x8xf32>
  %loss = graph.cross_entropy %b0, %t : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
