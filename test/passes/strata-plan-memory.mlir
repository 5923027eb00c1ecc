// Buffers whose lives do not overlap share workspace (each takes the
// smallest free block once those dead before its first use are freed);
// views take their root's offset; persistent buffers sit end to end. A buffer the
// communication stream touches has workspace of its own.
// RUN: strata-opt %s --strata-plan-memory | FileCheck %s

// CHECK: exec.template stage 0 attributes {persistent_bytes = 68 : i64, workspace_bytes = 768 : i64}
// CHECK-DAG: exec.buffer @p : tensor<1xf32> persistent at 0{{$}}
// CHECK-DAG: exec.buffer @q : tensor<1xf32> persistent at 64{{$}}
// r (received on the communication stream) first, alone: 0-255.
// CHECK-DAG: exec.buffer @r : tensor<64xf32> workspace at 0{{$}}
// a (256 B) lives over instructions 0-1, b (256 B) over 1-2: both alive at
// 1, so b goes above a; c (256 B) lives over 2-3, after a is dead, so it
// takes a's place; all of them above r.
// CHECK-DAG: exec.buffer @a : tensor<64xf32> workspace at 256{{$}}
// CHECK-DAG: exec.buffer @b : tensor<64xf32> workspace at 512{{$}}
// CHECK-DAG: exec.buffer @c : tensor<64xf32> workspace at 256{{$}}
// CHECK-DAG: exec.buffer @view : tensor<8x8xf32> workspace at 512 alias @b
module {
  exec.template stage 0 {
    exec.buffer @p : tensor<1xf32> persistent at -1
    exec.buffer @q : tensor<1xf32> persistent at -1
    exec.buffer @r : tensor<64xf32> workspace at -1
    exec.buffer @a : tensor<64xf32> workspace at -1
    exec.buffer @b : tensor<64xf32> workspace at -1
    exec.buffer @view : tensor<8x8xf32> workspace at -1 alias @b
    exec.buffer @c : tensor<64xf32> workspace at -1
    exec.event @received
    exec.program @main microbatch {
      exec.recv @r from stage 0 channel 0
      exec.record @received on comm
      exec.wait @received
      exec.launch "fill" () -> (@a) args {value = 1.0 : f64}
      exec.launch "add" (@a, @r) -> (@b) args {}
      exec.launch "copy" (@view) -> (@c) args {}
      exec.launch "sum_squares" (@c) -> (@p) args {first_part = 0 : i64, first_segments = array<i64>, part = 0 : i64, segments = array<i64: 0, 64>, windows = array<i64: 0, 64, 0>}
    }
  }
}
