// What strata-cuda-codegen refuses: exec-level input it would make a
// wrong kernel of is a compile error, not a plan a GPU would refuse.
//
// A gemm whose epilogue cuBLASLt computes differently from the plan's
// meaning (gelu_bias: its GELU is the tanh form; bias_grad: it overwrites
// the bias): exec IR lowered for the CPU.
// RUN: not strata-opt %s --split-input-file --strata-cuda-codegen 2>&1 | FileCheck %s

// CHECK: error: 'exec.gemm' op epilogue gelu_bias has no cuBLASLt equivalent (its GELU is the tanh form, its bias gradient overwrites): lower for the CUDA target with --strata-fuse-epilogues=bias-only, as strata-compile --target cuda does
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at -1
    exec.buffer @w : tensor<8x16xf32> persistent at -1
    exec.buffer @b : tensor<16xf32> persistent at -1
    exec.buffer @pre : tensor<4x16xf32> workspace at -1
    exec.buffer @y : tensor<4x16xf32> workspace at -1
    exec.program @main microbatch {
      exec.gemm @x, @w -> @y epilogue gelu_bias bias @b aux @pre {k = 8 : i64, lda = 8 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 4 : i64, n = 16 : i64}
    }
  }
}

// -----

// CHECK: error: 'exec.gemm' op epilogue bias_grad has no cuBLASLt equivalent
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at -1
    exec.buffer @dy : tensor<4x16xf32> workspace at -1
    exec.buffer @dw : tensor<8x16xf32> persistent at -1
    exec.buffer @db : tensor<16xf32> persistent at -1
    exec.program @main microbatch {
      exec.gemm @x, @dy -> @dw epilogue bias_grad bias @db {k = 4 : i64, lda = 8 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transpose_a}
    }
  }
}

// -----

// Nor does a launch that breaks its kernel's rules (exec-level input is
// checked against the catalog, as a plan load would, before an emitter
// reads a shape or an argument).
// CHECK: error: 'exec.launch' op has no CUDA kernel: transpose: transpose permutation does not map f32[2, 3] to f32[3, 2]
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<2x3xf32> workspace at 0
    exec.buffer @y : tensor<3x2xf32> workspace at 128
    exec.program @main microbatch {
      exec.launch "transpose" (@x) -> (@y) args {permutation = array<i64: 0, 7>}
    }
  }
}

// -----

// A `fuses N` group that breaks the rule strata-fuse-elementwise groups
// by: the add reads, broadcast (a row per thread), bytes the copy writes
// (@b lies in @y's first row), so one kernel would race.
// CHECK: error: 'exec.launch' op fuses 2 launches that cannot be one kernel: member 1 ('add') touches bytes that another thread of one kernel would write
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at 0
    exec.buffer @y : tensor<4x8xf32> workspace at 128
    exec.buffer @b : tensor<8xf32> workspace at 128
    exec.buffer @z : tensor<4x8xf32> workspace at 256
    exec.program @main microbatch {
      exec.launch "copy" (@x) -> (@y) args {} fuses 2
      exec.launch "add" (@x, @b) -> (@z) args {}
    }
  }
}

// -----

// A norm's forward only closes a group: first, it is refused.
// CHECK: error: 'exec.launch' op fuses 2 launches that cannot be one kernel: member 0 ('layer_norm_fwd'): a norm only closes a group
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at 0
    exec.buffer @w : tensor<8xf32> persistent at 0
    exec.buffer @bias : tensor<8xf32> persistent at 32
    exec.buffer @y : tensor<4x8xf32> workspace at 128
    exec.buffer @z : tensor<4x8xf32> workspace at 256
    exec.program @main microbatch {
      exec.launch "layer_norm_fwd" (@x, @w, @bias) -> (@y) args {epsilon = 1.000000e-05 : f64} fuses 2
      exec.launch "copy" (@y) -> (@z) args {}
    }
  }
}
