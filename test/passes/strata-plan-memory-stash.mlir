// The stash: each class's members laid out as one region of its slots,
// the slot its largest member's, or the stride the template gives it
// (`stash_strides`: a class placed by bytes, its slots 64 bytes each).
// RUN: strata-opt %s --split-input-file --strata-plan-memory --verify-diagnostics | FileCheck %s

// Chunk 0's kept pool (two buffers, 128 + 64 bytes) and held pool (256
// bytes) in one class placed by bytes: 10 slots of 64 bytes, 640 bytes.
// CHECK: exec.template stage 0 attributes {held_slots = array<i64: 10>, persistent_bytes = 0 : i64, stash_bytes = 640 : i64, stash_classes = array<i64: 0, 0, -1>, stash_slots = array<i64: 10>, stash_strides = array<i64: 64>
// CHECK: exec.buffer @k0 : tensor<32xf32> stash at 0 {slot_stride = 64 : i64, stash_group = 0 : i64}
// CHECK: exec.buffer @k1 : tensor<16xf32> stash at 128 {slot_stride = 64 : i64, stash_group = 0 : i64}
// CHECK: exec.buffer @h0 : tensor<64xf32> stash at 0 {slot_stride = 64 : i64, stash_group = 0 : i64, stash_pool = 1 : i32}
module {
  exec.template stage 0 attributes {stash_slots = array<i64: 10>, held_slots = array<i64: 10>, stash_classes = array<i64: 0, 0, -1>, stash_strides = array<i64: 64>} {
    exec.buffer @k0 : tensor<32xf32> stash at -1 {stash_group = 0 : i64}
    exec.buffer @k1 : tensor<16xf32> stash at -1 {stash_group = 0 : i64}
    exec.buffer @h0 : tensor<64xf32> stash at -1 {stash_group = 0 : i64, stash_pool = 1 : i32}
  }
}

// -----

module {
  // expected-error @+1 {{gives stash class 0 no stride that is a positive multiple of 64 bytes}}
  exec.template stage 0 attributes {stash_slots = array<i64: 2>, held_slots = array<i64: 2>, stash_classes = array<i64: 0, 0, -1>, stash_strides = array<i64: 100>} {
    exec.buffer @k0 : tensor<32xf32> stash at -1 {stash_group = 0 : i64}
    exec.buffer @h0 : tensor<64xf32> stash at -1 {stash_group = 0 : i64, stash_pool = 1 : i32}
  }
}
