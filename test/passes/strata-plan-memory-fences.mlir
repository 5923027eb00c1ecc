// A buffer another stream touches within a program, fenced (the
// ring of context parallelism's shifts, on the context stream), lives
// from the compute record that stream waited for before it to the compute
// stream's first wait on a record that stream made after it, and
// shares workspace by that life; one without both fences has workspace of
// its own for the whole iteration.
// RUN: strata-opt %s --strata-plan-memory | FileCheck %s

// lone_in and lone_out: a shift after which the compute stream never
// waits, each its own (0-511), before the program's lives.
// CHECK: exec.template stage 0 attributes {persistent_bytes = 0 : i64, workspace_bytes = 1280 : i64}
// CHECK-DAG: exec.buffer @lone_in : tensor<64xf32> workspace at 0{{$}}
// CHECK-DAG: exec.buffer @lone_out : tensor<64xf32> workspace at 256{{$}}
// dead lives over instructions 0-1; x over 1 (written) to 7 (the wait
// after the shift that reads it); came over 2 (the record the shift
// waited for) to 8, so it takes dead's place; busy, at 6, goes above both;
// after, at 8, takes x's (dead by then).
// CHECK-DAG: exec.buffer @dead : tensor<64xf32> workspace at 512{{$}}
// CHECK-DAG: exec.buffer @x : tensor<64xf32> workspace at 768{{$}}
// CHECK-DAG: exec.buffer @came : tensor<64xf32> workspace at 512{{$}}
// CHECK-DAG: exec.buffer @busy : tensor<64xf32> workspace at 1024{{$}}
// CHECK-DAG: exec.buffer @after : tensor<64xf32> workspace at 768{{$}}
module {
  exec.template stage 0 {
    exec.buffer @dead : tensor<64xf32> workspace at -1
    exec.buffer @x : tensor<64xf32> workspace at -1
    exec.buffer @came : tensor<64xf32> workspace at -1
    exec.buffer @busy : tensor<64xf32> workspace at -1
    exec.buffer @after : tensor<64xf32> workspace at -1
    exec.buffer @lone_in : tensor<64xf32> workspace at -1
    exec.buffer @lone_out : tensor<64xf32> workspace at -1
    exec.event @issued
    exec.event @landed
    exec.program @main microbatch {
      exec.launch "fill" () -> (@dead) args {value = 1.0 : f64}
      exec.launch "copy" (@dead) -> (@x) args {}
      exec.record @issued
      exec.wait @issued on context
      exec.collective shift @x -> @came over [3] on context
      exec.record @landed on context
      exec.launch "fill" () -> (@busy) args {value = 2.0 : f64}
      exec.wait @landed
      exec.launch "copy" (@came) -> (@after) args {}
      exec.launch "fill" () -> (@lone_in) args {value = 3.0 : f64}
      exec.collective shift @lone_in -> @lone_out over [3] on context
    }
  }
}
