// One stage: each microbatch, then the optimizer.
// RUN: strata-opt %s --strata-schedule=microbatches=3 | FileCheck %s
// RUN: strata-opt %s --strata-schedule=microbatches=0 --verify-diagnostics --split-input-file

// CHECK: dist.schedule stage 0 microbatches 3 {
// CHECK-NEXT: dist.step @microbatch microbatch 0
// CHECK-NEXT: dist.step @microbatch microbatch 1
// CHECK-NEXT: dist.step @microbatch microbatch 2
// CHECK-NEXT: dist.step @optimizer
// CHECK-NEXT: }
// expected-error @below {{microbatches must be at least 1, got 0}}
module {
  func.func @microbatch() { return }
  func.func @optimizer() { return }
}
