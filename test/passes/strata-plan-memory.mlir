// Buffers whose lives do not overlap share workspace; views take their
// root's offset; persistent buffers sit end to end.
// RUN: strata-opt %s --strata-plan-memory | FileCheck %s

// CHECK: exec.rank 0 attributes {persistent_bytes = 68 : i64, workspace_bytes = 512 : i64}
// CHECK-DAG: exec.buffer @p : tensor<1xf32> persistent at 0
// CHECK-DAG: exec.buffer @q : tensor<1xf32> persistent at 64
// a (256 B) lives over instructions 0-1, b (256 B) over 1-2: both alive at
// 1, so b goes above a; c (256 B) lives over 2-3, after a is dead, so it
// takes a's place.
// CHECK-DAG: exec.buffer @a : tensor<64xf32> workspace at 0
// CHECK-DAG: exec.buffer @b : tensor<64xf32> workspace at 256
// CHECK-DAG: exec.buffer @c : tensor<64xf32> workspace at 0
// CHECK-DAG: exec.buffer @view : tensor<8x8xf32> workspace at 256 alias @b
module {
  exec.rank 0 {
    exec.buffer @p : tensor<1xf32> persistent at -1
    exec.buffer @q : tensor<1xf32> persistent at -1
    exec.buffer @a : tensor<64xf32> workspace at -1
    exec.buffer @b : tensor<64xf32> workspace at -1
    exec.buffer @view : tensor<8x8xf32> workspace at -1 alias @b
    exec.buffer @c : tensor<64xf32> workspace at -1
    exec.program @main "microbatch" {
      exec.kernel "fill" () -> (@a) {value = 1.0 : f64}
      exec.kernel "copy" (@a) -> (@b)
      exec.kernel "copy" (@view) -> (@c)
      exec.kernel "sum_squares" (@c) -> (@p)
    }
  }
}
