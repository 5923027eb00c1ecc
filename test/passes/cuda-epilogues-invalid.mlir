// A gemm whose epilogue cuBLASLt computes differently from the plan's
// meaning (gelu_bias: its GELU is the tanh form; bias_grad: it overwrites
// the bias) gets no CUDA kernels: an exec-level input lowered for the CPU
// is a compile error for the CUDA target, not a plan a GPU would refuse.
// RUN: not strata-opt %s --split-input-file --strata-cuda-codegen 2>&1 | FileCheck %s

// CHECK: error: 'exec.gemm' op epilogue gelu_bias has no cuBLASLt equivalent (its GELU is the tanh form, its bias gradient overwrites): lower for the CUDA target with --strata-lower-to-exec=bias-only-epilogues, as strata-compile --target cuda does
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at -1
    exec.buffer @w : tensor<8x16xf32> persistent at -1
    exec.buffer @b : tensor<16xf32> persistent at -1
    exec.buffer @pre : tensor<4x16xf32> workspace at -1
    exec.buffer @y : tensor<4x16xf32> workspace at -1
    exec.program @main "microbatch" {
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
    exec.program @main "microbatch" {
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
    exec.program @main "microbatch" {
      exec.launch "transpose" (@x) -> (@y) args {permutation = array<i64: 0, 7>}
    }
  }
}
