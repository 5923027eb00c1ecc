// Data parallelism's rules: replicas hold the same model and see different
// samples, and their gradients are summed before the optimizer (the loss
// seed already divides by microbatches x dp, so the sum is the mean).
//   1. The mesh's dp axis (axis 1: tp x dp x pp x cp) takes the size.
//   2. @optimizer starts with one dist.reduce_gradients over the dp axis,
//      carrying the bucket size; the lowering lays out the buckets.
//   3. Plain: an all-reduce leaves every rank whole, equal gradients, so
//      the gradient norm needs no reduction over dp.
//   4. With the distributed optimizer (ZeRO-1) the gradients are
//      reduce-scattered and each rank's squares cover its part: the norm is
//      summed over dp too, after (and together with) tensor parallelism's.
//   5. Size 1 changes nothing but the mesh; a size or bucket below 1, or a
//      step without @optimizer, is an error.
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-data-parallel=size=2 | FileCheck %s
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-data-parallel="size=4 distributed-optimizer bucket-elements=8" | FileCheck %s --check-prefix=ZERO
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-tensor-parallel=size=2 --strata-data-parallel="size=2 distributed-optimizer" | FileCheck %s --check-prefix=TP
// RUN: strata-opt %s --strata-autodiff --strata-optimizer --strata-data-parallel=size=1 | FileCheck %s --check-prefix=ONE
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-data-parallel=size=0 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not strata-opt %s --strata-autodiff --strata-optimizer --strata-data-parallel="size=2 bucket-elements=0" 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not strata-opt %s --strata-autodiff --strata-data-parallel=size=2 2>&1 | FileCheck %s --check-prefix=NOOPT

// CHECK: shard.grid @mesh(shape = 1x2x1x1)
// The forward and backward are the replicas' own: no collective there.
// CHECK-LABEL: func.func @microbatch
// CHECK-NOT: shard.
// CHECK-NOT: dist.
// CHECK-LABEL: func.func @optimizer
// CHECK-NEXT: dist.reduce_gradients on @mesh grid_axes = [1] {bucket_elements = 40000000 : i64}
// CHECK-NOT: shard.all_reduce
// CHECK: %[[NORM:.*]], %{{.*}} = graph.clip_coefficient %{{.*}}
// CHECK-NOT: shard.all_reduce
// CHECK: return %[[NORM]]

// ZERO: shard.grid @mesh(shape = 1x4x1x1)
// ZERO-LABEL: func.func @optimizer
// ZERO-NEXT: dist.reduce_gradients on @mesh grid_axes = [1] {bucket_elements = 8 : i64, distributed_optimizer}
// ZERO: %[[SUM:.*]] = graph.add
// ZERO-NEXT: %[[ALL:.*]] = shard.all_reduce %[[SUM]] on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
// ZERO-NEXT: graph.clip_coefficient %[[ALL]]

// TP: shard.grid @mesh(shape = 2x2x1x1)
// TP-LABEL: func.func @optimizer
// TP-NEXT: dist.reduce_gradients on @mesh grid_axes = [1] {bucket_elements = 40000000 : i64, distributed_optimizer}
// TP: %[[ALL:.*]] = shard.all_reduce %{{.*}} on @mesh grid_axes = [0, 1] : tensor<f32> -> tensor<f32>
// TP-NEXT: graph.clip_coefficient %[[ALL]]

// ONE: shard.grid @mesh(shape = 1x1x1x1)
// ONE-NOT: dist.reduce_gradients
// ONE-NOT: shard.all_reduce

// SIZE: error: data-parallel size and bucket size must be at least 1
// NOOPT: error: data parallelism needs @optimizer: run --strata-optimizer first

func.func @model(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %w = graph.param "w" normal(2.000000e-02) : tensor<4x8xf32>
  %b = graph.param "b" zeros : tensor<8xf32>
  %m = graph.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %l = graph.add %m, %b : tensor<2x8xf32>, tensor<8xf32>
  %loss = graph.cross_entropy %l, %t : (tensor<2x8xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
