// Every launch gets a generated kernel, its launch shape and the name of
// its code; launches with equal shapes (here the two gelu_fwd on [4, 64])
// share one exec.code; a per-rank value stays a kernel parameter.
// RUN: strata-opt %s --strata-cuda-codegen=arch=sm_90a | FileCheck %s
// RUN: strata-opt %s --strata-cuda-codegen --strata-cuda-codegen | FileCheck %s --check-prefix=AGAIN
// RUN: not strata-opt %s --strata-cuda-codegen=arch=sm_75 2>&1 | FileCheck %s --check-prefix=ARCH

// CHECK: module attributes {strata.cuda_arch = "sm_90a"}
// CHECK: exec.launch "gelu_fwd" (@x) -> (@a) {{.*}}{block = array<i64: 256, 1, 1>, code = "gelu_fwd_0", grid = array<i64: 1, 1, 1>}
// CHECK: exec.launch "gelu_fwd" (@a) -> (@b) {{.*}}code = "gelu_fwd_0"
// CHECK: exec.launch "gelu_fwd" (@c) -> (@d) {{.*}}code = "gelu_fwd_1"
// CHECK: exec.launch "embedding_fwd" {{.*}} per_rank {vocab_offset = array<i64: 0, 16>} {block = array<i64: 128, 1, 1>, code = "embedding_fwd_0", grid = array<i64: 4, 1, 1>}
// CHECK: exec.code @gelu_fwd_0 kernel "gelu_fwd" {source = "{{.*}}gelu_fwd_0(const float *x, float *y)
// CHECK: exec.code @gelu_fwd_1 kernel "gelu_fwd" {source = "{{.*}}gelu_fwd_1(const bf16 *x, bf16 *y)
// CHECK: exec.code @embedding_fwd_0 kernel "embedding_fwd" {source = "{{.*}}(const float *table, const int *ids, float *y, i64 vocab_offset)

// Run twice, the second run replaces the first's code.
// AGAIN-COUNT-3: exec.code
// AGAIN-NOT: exec.code

// ARCH: error: unknown CUDA architecture 'sm_75' (sm_80 or sm_90a)
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4x64xf32> workspace at -1
    exec.buffer @a : tensor<4x64xf32> workspace at -1
    exec.buffer @b : tensor<4x64xf32> workspace at -1
    exec.buffer @c : tensor<4x64xbf16> workspace at -1
    exec.buffer @d : tensor<4x64xbf16> workspace at -1
    exec.buffer @table : tensor<16x8xf32> persistent at -1
    exec.buffer @ids : tensor<4xi32> persistent at -1
    exec.buffer @e : tensor<4x8xf32> workspace at -1
    exec.program @main microbatch {
      exec.launch "gelu_fwd" (@x) -> (@a) args {}
      exec.launch "gelu_fwd" (@a) -> (@b) args {}
      exec.launch "gelu_fwd" (@c) -> (@d) args {}
      exec.launch "embedding_fwd" (@table, @ids) -> (@e) args {vocab_offset = 0 : i64} per_rank {vocab_offset = array<i64: 0, 16>}
    }
  }
}
