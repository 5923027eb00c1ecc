// The fusion pass groups adjacent pointwise launches over the same
// elements into one kernel (`fuses N` on the first), and only where one
// thread per element stays correct: buffers whose bytes partly overlap,
// a broadcast operand that overlaps what the group writes, a different
// element count or condition, or an instruction between, each end a group.
// RUN: strata-opt %s --split-input-file --strata-fuse-elementwise | FileCheck %s
// RUN: strata-opt %s --split-input-file --strata-fuse-elementwise --strata-cuda-codegen | FileCheck %s --check-prefix=CODE
// Fusing again what was generated without fusion replaces its code too.
// RUN: strata-opt %s --split-input-file --strata-cuda-codegen --strata-fuse-elementwise --strata-cuda-codegen | FileCheck %s --check-prefix=CODE

// A residual add, a bias add, GELU and a bf16 cast: one group of four.
// CHECK-LABEL: exec.template stage 0
// CHECK: exec.launch "add" (@x, @r) -> (@a) args {} fuses 4
// CHECK-NEXT: exec.launch "add" (@a, @bias) -> (@b) args {}{{$}}
// CHECK-NEXT: exec.launch "gelu_fwd" (@b) -> (@c) args {}{{$}}
// CHECK-NEXT: exec.launch "copy" (@c) -> (@h) args {}{{$}}
// The members keep no code of their own; the group's is named for them.
// CODE: exec.launch "add" (@x, @r) -> (@a) args {} fuses 4 {block = array<i64: 256, 1, 1>, code = "fused_0", grid = array<i64: 1, 1, 1>}
// CODE-NEXT: exec.launch "add" (@a, @bias) -> (@b) args {}{{$}}
// CODE: exec.code @fused_0 kernel "add+add+gelu_fwd+copy"
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at 0
    exec.buffer @r : tensor<4x8xf32> workspace at 128
    exec.buffer @a : tensor<4x8xf32> workspace at 256
    exec.buffer @bias : tensor<8xf32> persistent at 0
    exec.buffer @b : tensor<4x8xf32> workspace at 384
    exec.buffer @c : tensor<4x8xf32> workspace at 512
    exec.buffer @h : tensor<4x8xbf16> workspace at 640
    exec.program @main microbatch {
      exec.launch "add" (@x, @r) -> (@a) args {}
      exec.launch "add" (@a, @bias) -> (@b) args {}
      exec.launch "gelu_fwd" (@b) -> (@c) args {}
      exec.launch "copy" (@c) -> (@h) args {}
    }
  }
}

// -----

// In place, the same bytes under two names (memory planning reuses a dead
// buffer's): still one thread per element.
// CHECK-LABEL: exec.template stage 0
// CHECK: exec.launch "scale" (@x) -> (@y) args {factor = 2.000000e+00 : f64} fuses 2
// CHECK-NEXT: exec.launch "accumulate" (@y) -> (@x2) args {}{{$}}
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<32xf32> workspace at 0
    exec.buffer @y : tensor<32xf32> workspace at 128
    exec.buffer @x2 : tensor<32xf32> workspace at 0
    exec.program @main microbatch {
      exec.launch "scale" (@x) -> (@y) args {factor = 2.0 : f64}
      exec.launch "accumulate" (@y) -> (@x2) args {}
    }
  }
}

// -----

// Two names of the same bytes, both written: the kernel knows them as one
// value, so the GELU reads what the second scale left there.
// CHECK-LABEL: exec.template stage 0
// CHECK: exec.launch "scale" (@x) -> (@a) args {factor = 2.000000e+00 : f64} fuses 3
// CODE: exec.code @fused_0 kernel "scale+scale+gelu_fwd" {{.*}}v1[e] = stored(p1_1, (r0[e] * 3.f));{{.*}}v2[e] = stored(p2_1, gelu(v1[e]));
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<32xf32> workspace at 0
    exec.buffer @a : tensor<32xf32> workspace at 128
    exec.buffer @a2 : tensor<32xf32> workspace at 128
    exec.buffer @y : tensor<32xf32> workspace at 256
    exec.program @main microbatch {
      exec.launch "scale" (@x) -> (@a) args {factor = 2.0 : f64}
      exec.launch "scale" (@x) -> (@a2) args {factor = 3.0 : f64}
      exec.launch "gelu_fwd" (@a) -> (@y) args {}
    }
  }
}

// -----

// The second add's output partly overlaps the first's input (shifted by
// one element): thread i would write what thread i + 1 still reads.
// CHECK-LABEL: exec.template stage 0
// CHECK-NOT: fuses
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<32xf32> workspace at 0
    exec.buffer @y : tensor<32xf32> workspace at 128
    exec.buffer @z : tensor<32xf32> workspace at 4
    exec.program @main microbatch {
      exec.launch "add" (@x, @x) -> (@y) args {}
      exec.launch "gelu_fwd" (@y) -> (@z) args {}
    }
  }
}

// -----

// A broadcast operand (read at i mod 8 by many threads) that the group
// writes: no group.
// CHECK-LABEL: exec.template stage 0
// CHECK-NOT: fuses
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at 0
    exec.buffer @row : tensor<8xf32> workspace at 256
    exec.buffer @y : tensor<4x8xf32> workspace at 512
    exec.buffer @z : tensor<4x8xf32> workspace at 256
    exec.program @main microbatch {
      exec.launch "add" (@x, @row) -> (@y) args {}
      exec.launch "gelu_fwd" (@y) -> (@z) args {}
    }
  }
}

// -----

// Each neighbouring pair differs in one respect that keeps it apart: the
// number of elements, the condition, a gemm between, a kernel that is
// not pointwise, a buffer placed per rank.
// CHECK-LABEL: exec.template stage 0
// CHECK-NOT: fuses
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at 0
    exec.buffer @y : tensor<4x8xf32> workspace at 128
    exec.buffer @s : tensor<8xf32> workspace at 256
    exec.buffer @t : tensor<8xf32> workspace at 384
    exec.buffer @s2 : tensor<8xf32> workspace at 512
    exec.buffer @u : tensor<4x8xf32> workspace at 640
    exec.buffer @w : tensor<8x8xf32> persistent at 0
    exec.buffer @v : tensor<4x8xf32> workspace at 768
    exec.buffer @s3 : tensor<8xf32> workspace at 896
    exec.buffer @v2 : tensor<4x8xf32> workspace at 1024
    exec.buffer @flat : tensor<64xf32> persistent at 256
    exec.buffer @part : tensor<32xf32> persistent at 256 alias @flat + 0 {per_rank = array<i64: 1, 128>}
    exec.program @main microbatch {
      exec.launch "gelu_fwd" (@x) -> (@y) args {}
      exec.launch "silu_fwd" (@s) -> (@t) args {}
      exec.launch "scale" (@t) -> (@s2) args {factor = 0.5 : f64} if last_microbatch
      exec.launch "gelu_fwd" (@x) -> (@u) args {}
      exec.gemm @x, @w -> @y {k = 8 : i64, lda = 8 : i64, ldb = 8 : i64, ldd = 8 : i64, m = 4 : i64, n = 8 : i64}
      exec.launch "gelu_fwd" (@u) -> (@v) args {}
      exec.launch "sum_to" (@v) -> (@s3) args {accumulate = false}
      exec.launch "gelu_fwd" (@y) -> (@v2) args {}
      exec.launch "accumulate" (@v2) -> (@part) args {}
    }
  }
}

// -----

// The residual add before a norm: the residual and bias adds, then the
// LayerNorm of what they wrote, one kernel whose warps run the adds (a
// chain) on their row's chunks and normalize what it returns.
// CHECK-LABEL: exec.template stage 0
// CHECK: exec.launch "add" (@x, @r) -> (@a) args {} fuses 3
// CHECK-NEXT: exec.launch "add" (@a, @bias) -> (@h) args {}{{$}}
// CHECK-NEXT: exec.launch "layer_norm_fwd" (@h, @w, @b) -> (@y) args {epsilon = 1.000000e-05 : f64}{{$}}
// CODE: exec.code @fused_0 kernel "add+add+layer_norm_fwd" {{.*}}storeN<V>(p1_2, i, v1);{{.*}}out[e] = v1[e];{{.*}}normFwd<{{[0-9]+}}, true, 4>(\0A      Chain{p0_0, p0_1, p0_2, p1_0, p1_1, p1_2}, p2_0, p2_1, p2_2, p2_3,
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at 0
    exec.buffer @r : tensor<4x8xf32> workspace at 128
    exec.buffer @a : tensor<4x8xf32> workspace at 256
    exec.buffer @bias : tensor<8xf32> persistent at 0
    exec.buffer @h : tensor<4x8xf32> workspace at 384
    exec.buffer @w : tensor<8xf32> persistent at 64
    exec.buffer @b : tensor<8xf32> persistent at 128
    exec.buffer @y : tensor<4x8xf32> workspace at 512
    exec.program @main microbatch {
      exec.launch "add" (@x, @r) -> (@a) args {}
      exec.launch "add" (@a, @bias) -> (@h) args {}
      exec.launch "layer_norm_fwd" (@h, @w, @b) -> (@y) args {epsilon = 1.0e-05 : f64}
    }
  }
}

// -----

// A norm closes a group only over what the group writes, and as a member
// would: RMSNorm of the add's input (not its output), and RMSNorm of the
// add's output whose own output partly overlaps the add's input, are left
// alone. (Its output exactly on the bytes of a buffer the group used is
// fine: the one thread that touched the element writes it.)
// CHECK-LABEL: exec.template stage 0
// CHECK-NOT: fuses
// CHECK: exec.launch "rms_norm_fwd" (@x, @w) -> (@y)
// CHECK-NOT: fuses
// CHECK: exec.launch "rms_norm_fwd" (@a, @w) -> (@x2)
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at 0
    exec.buffer @x2 : tensor<4x8xf32> workspace at 64
    exec.buffer @r : tensor<4x8xf32> workspace at 128
    exec.buffer @a : tensor<4x8xf32> workspace at 256
    exec.buffer @w : tensor<8xf32> persistent at 0
    exec.buffer @y : tensor<4x8xf32> workspace at 384
    exec.program @main microbatch {
      exec.launch "add" (@x, @r) -> (@a) args {}
      exec.launch "rms_norm_fwd" (@x, @w) -> (@y) args {epsilon = 1.0e-05 : f64}
      exec.launch "add" (@x, @r) -> (@a) args {}
      exec.launch "rms_norm_fwd" (@a, @w) -> (@x2) args {epsilon = 1.0e-05 : f64}
    }
  }
}

// -----

// The norm's output on the residual's bytes (memory planning reuses them
// once the add has read them): still one kernel, since the lane that read
// element c of x for the add writes element c of y.
// CHECK-LABEL: exec.template stage 0
// CHECK: exec.launch "add" (@x, @r) -> (@a) args {} fuses 2
// CHECK-NEXT: exec.launch "layer_norm_fwd" (@a, @w, @b) -> (@y) args {epsilon = 1.000000e-05 : f64}{{$}}
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at 0
    exec.buffer @y : tensor<4x8xf32> workspace at 0
    exec.buffer @r : tensor<4x8xf32> workspace at 128
    exec.buffer @a : tensor<4x8xf32> workspace at 256
    exec.buffer @w : tensor<8xf32> persistent at 0
    exec.buffer @b : tensor<8xf32> persistent at 32
    exec.program @main microbatch {
      exec.launch "add" (@x, @r) -> (@a) args {}
      exec.launch "layer_norm_fwd" (@a, @w, @b) -> (@y) args {epsilon = 1.0e-05 : f64}
    }
  }
}

// -----

// A norm weight on bytes the group writes: every row's warp reads it, so
// the group stays as it is and the norm runs after it.
// CHECK-LABEL: exec.template stage 0
// CHECK: exec.launch "add" (@x, @r) -> (@a) args {} fuses 2
// CHECK-NEXT: exec.launch "scale" (@a) -> (@h) args {factor = 2.000000e+00 : f64}{{$}}
// CHECK-NEXT: exec.launch "rms_norm_fwd" (@h, @w) -> (@y) args {epsilon = 1.000000e-05 : f64}{{$}}
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x8xf32> workspace at 0
    exec.buffer @r : tensor<4x8xf32> workspace at 128
    exec.buffer @a : tensor<4x8xf32> workspace at 256
    exec.buffer @w : tensor<8xf32> workspace at 256
    exec.buffer @h : tensor<4x8xf32> workspace at 384
    exec.buffer @y : tensor<4x8xf32> workspace at 512
    exec.program @main microbatch {
      exec.launch "add" (@x, @r) -> (@a) args {}
      exec.launch "scale" (@a) -> (@h) args {factor = 2.0 : f64}
      exec.launch "rms_norm_fwd" (@h, @w) -> (@y) args {epsilon = 1.0e-05 : f64}
    }
  }
}
