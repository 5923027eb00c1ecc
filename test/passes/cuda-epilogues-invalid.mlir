// Gemms whose epilogue the CUDA target cannot rewrite into a launch over
// whole buffers are an error, not a wrong plan.
// RUN: not strata-opt %s --split-input-file --strata-cuda-epilogues 2>&1 | FileCheck %s


// CHECK: error: 'exec.gemm' op epilogue gelu_bias needs beta 0 and D and aux whole, unbatched [m, n] buffers for the CUDA target
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at -1
    exec.buffer @w : tensor<8x16xf32> persistent at -1
    exec.buffer @b : tensor<16xf32> persistent at -1
    exec.buffer @pre : tensor<4x16xf32> workspace at -1
    exec.buffer @y : tensor<4x16xf32> workspace at -1
    exec.program @main "microbatch" {
      exec.gemm @x, @w -> @y epilogue gelu_bias bias @b aux @pre {k = 8 : i64, lda = 8 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 4 : i64, n = 16 : i64, beta = 1.0 : f32}
    }
  }
}

// -----

// CHECK: error: 'exec.gemm' op epilogue bias_grad needs op(B) an untransposed, whole, unbatched [k, n] buffer for the CUDA target
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at -1
    exec.buffer @dy : tensor<16x4xf32> workspace at -1
    exec.buffer @dw : tensor<8x16xf32> persistent at -1
    exec.buffer @db : tensor<16xf32> persistent at -1
    exec.program @main "microbatch" {
      exec.gemm @x, @dy -> @dw epilogue bias_grad bias @db {k = 4 : i64, lda = 8 : i64, ldb = 4 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transpose_a, transpose_b}
    }
  }
}
