// The overlap pass moves the optimizer's bucket traffic (exec.bucket)
// beside the compute, on the communication stream, ordered by events:
// - overlap-grad-reduce: a bucket's reduction moves to right after the last
//   microbatch's last write of its gradients (record on compute, wait on
//   comm, reduce on comm, all in the last microbatch only); each program
//   that issues reductions records @reduced:P after its last, and the
//   optimizer waits for them first.
// - a reduction whose gradients an instruction before it in the optimizer
//   writes (a tied or partial gradient's collective) stays where it is.
// - overlap-param-gather: the gathers follow @updated on the communication
//   stream, each recording @gathered:N, which every program waits for
//   before its first read of those parameters.
// - a bucket no program writes is an error: nothing would reduce it; so
//   is a template without a schedule to find the writers in.
// RUN: strata-opt %s --split-input-file --strata-overlap-communication --verify-diagnostics | FileCheck %s
// Both off: nothing moves.
// RUN: strata-opt %s --split-input-file --strata-overlap-communication="overlap-grad-reduce=false overlap-param-gather=false" | FileCheck %s --check-prefix=OFF --implicit-check-not="on comm" --implicit-check-not="exec.event"

// CHECK-LABEL: exec.template stage 0
// CHECK: exec.event @"written:0"
// CHECK: exec.event @"reduced:microbatch"
// CHECK: exec.event @updated
// CHECK: exec.event @"gathered:0"
// CHECK: exec.event @"gathered:1"
// CHECK-NEXT: exec.program @microbatch microbatch {
// Bucket 0's parameters read first: its gather waited on; bucket 1's too.
// CHECK-NEXT: exec.wait @"gathered:0"{{$}}
// CHECK-NEXT: exec.launch "copy" (@"param:a") -> (@x)
// CHECK-NEXT: exec.wait @"gathered:1"{{$}}
// CHECK-NEXT: exec.launch "copy" (@"param:b") -> (@y)
// CHECK-NEXT: exec.launch "copy" (@x) -> (@"grad:a")
// Bucket 0 is complete after its last write: reduced here.
// CHECK-NEXT: exec.record @"written:0" if last_microbatch
// CHECK-NEXT: exec.wait @"written:0" on comm if last_microbatch
// CHECK-NEXT: exec.collective all_reduce_sum @"bucket:0" -> @"bucket:0" over [1] on comm if last_microbatch {exec.bucket = 0 : i64}
// CHECK-NEXT: exec.record @"reduced:microbatch" on comm if last_microbatch
// CHECK-NEXT: exec.launch "copy" (@y) -> (@"grad:b")
// CHECK-NEXT: {{^ *[}]$}}
// CHECK-NEXT: exec.program @optimizer optimizer {
// CHECK-NEXT: exec.wait @"reduced:microbatch"{{$}}
// Bucket 1's (tied) gradient is finished by another collective first: it
// stays after it.
// CHECK-NEXT: exec.collective all_reduce_sum @"grad:b" -> @"grad:b" over [2]
// CHECK-NEXT: exec.collective all_reduce_sum @"bucket:1" -> @"bucket:1" over [1] {exec.bucket = 1 : i64}
// CHECK-NEXT: exec.launch "fill"
// CHECK-NEXT: exec.record @updated{{$}}
// CHECK-NEXT: exec.wait @updated on comm{{$}}
// CHECK-NEXT: exec.collective all_gather @"own-params:0" -> @"bucket-params:0" over [1] on comm {exec.bucket = 0 : i64}
// CHECK-NEXT: exec.record @"gathered:0" on comm{{$}}
// CHECK-NEXT: exec.collective all_gather @"own-params:1" -> @"bucket-params:1" over [1] on comm {exec.bucket = 1 : i64}
// CHECK-NEXT: exec.record @"gathered:1" on comm{{$}}
// CHECK-NEXT: {{^ *[}]$}}
// OFF-LABEL: exec.template stage 0
// OFF: exec.program @optimizer optimizer {
// OFF-NEXT: exec.collective all_reduce_sum @"grad:b" -> @"grad:b" over [2]
// OFF-NEXT: exec.collective all_reduce_sum @"bucket:0" -> @"bucket:0" over [1] {exec.bucket = 0 : i64}
module {
  exec.template stage 0 {
    exec.buffer @params : tensor<16xf32> persistent at -1
    exec.buffer @grads : tensor<16xf32> persistent at -1 {zero_init}
    exec.buffer @"bucket:0" : tensor<8xf32> persistent at -1 alias @grads
    exec.buffer @"bucket:1" : tensor<8xf32> persistent at -1 alias @grads + 32
    exec.buffer @"bucket-params:0" : tensor<8xf32> persistent at -1 alias @params
    exec.buffer @"bucket-params:1" : tensor<8xf32> persistent at -1 alias @params + 32
    exec.buffer @"own-params:0" : tensor<4xf32> persistent at -1 alias @params {per_rank = array<i64: 1, 16>}
    exec.buffer @"own-params:1" : tensor<4xf32> persistent at -1 alias @params + 32 {per_rank = array<i64: 1, 16>}
    exec.buffer @"param:a" : tensor<8xf32> persistent at -1 alias @params
    exec.buffer @"param:b" : tensor<8xf32> persistent at -1 alias @params + 32
    exec.buffer @"grad:a" : tensor<8xf32> persistent at -1 alias @grads
    exec.buffer @"grad:b" : tensor<8xf32> persistent at -1 alias @grads + 32
    exec.buffer @x : tensor<8xf32> workspace at -1
    exec.buffer @y : tensor<8xf32> workspace at -1
    exec.program @microbatch microbatch {
      exec.launch "copy" (@"param:a") -> (@x) args {}
      exec.launch "copy" (@"param:b") -> (@y) args {}
      exec.launch "copy" (@x) -> (@"grad:a") args {}
      exec.launch "copy" (@y) -> (@"grad:b") args {}
    }
    exec.program @optimizer optimizer {
      exec.collective all_reduce_sum @"grad:b" -> @"grad:b" over [2]
      exec.collective all_reduce_sum @"bucket:0" -> @"bucket:0" over [1] {exec.bucket = 0 : i64}
      exec.collective all_reduce_sum @"bucket:1" -> @"bucket:1" over [1] {exec.bucket = 1 : i64}
      exec.launch "fill" () -> (@grads) args {value = 0.000000e+00 : f64}
      exec.collective all_gather @"own-params:0" -> @"bucket-params:0" over [1] {exec.bucket = 0 : i64}
      exec.collective all_gather @"own-params:1" -> @"bucket-params:1" over [1] {exec.bucket = 1 : i64}
    }
    exec.schedule {
      exec.run @microbatch microbatch 0
      exec.run @microbatch microbatch 1
      exec.run @optimizer
    }
  }
}

// -----

// A bucket no backward writes: the reduction would never see its gradients.
module {
  exec.template stage 0 {
    exec.buffer @grads : tensor<8xf32> persistent at -1 {zero_init}
    exec.buffer @"bucket:0" : tensor<8xf32> persistent at -1 alias @grads
    exec.buffer @x : tensor<8xf32> workspace at -1
    exec.program @microbatch microbatch {
      exec.launch "fill" () -> (@x) args {value = 0.000000e+00 : f64}
    }
    exec.program @optimizer optimizer {
      // expected-error @+1 {{gradient bucket 0 of stage 0 is written by no backward: nothing would reduce it}}
      exec.collective all_reduce_sum @"bucket:0" -> @"bucket:0" over [1] {exec.bucket = 0 : i64}
    }
    exec.schedule {
      exec.run @microbatch microbatch 0
      exec.run @optimizer
    }
  }
}

// -----

// No schedule: which program writes a bucket last cannot be known.
module {
  // expected-error @+1 {{has no exec.schedule: the last microbatch's writers cannot be found}}
  exec.template stage 0 {
    exec.buffer @grads : tensor<8xf32> persistent at -1 {zero_init}
    exec.buffer @"bucket:0" : tensor<8xf32> persistent at -1 alias @grads
    exec.program @optimizer optimizer {
      exec.collective all_reduce_sum @"bucket:0" -> @"bucket:0" over [1] {exec.bucket = 0 : i64}
    }
  }
}
