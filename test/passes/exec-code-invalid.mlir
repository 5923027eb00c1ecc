// A launch's generated code must be an exec.code of the module, made for
// the launch's own kernel, and come with a launch shape.
// RUN: strata-opt %s --split-input-file --verify-diagnostics

module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4xf32> workspace at -1
    exec.buffer @y : tensor<4xf32> workspace at -1
    exec.program @main microbatch {
      // expected-error @+1 {{names generated code 'copy_0', which is no exec.code of the module}}
      exec.launch "copy" (@x) -> (@y) args {} {code = "copy_0", grid = array<i64: 1, 1, 1>, block = array<i64: 256, 1, 1>}
    }
  }
}

// -----

module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4xf32> workspace at -1
    exec.buffer @y : tensor<4xf32> workspace at -1
    exec.program @main microbatch {
      // expected-error @+1 {{launches 'copy' with code 'gelu_fwd_0', generated for 'gelu_fwd'}}
      exec.launch "copy" (@x) -> (@y) args {} {code = "gelu_fwd_0", grid = array<i64: 1, 1, 1>, block = array<i64: 256, 1, 1>}
    }
  }
  exec.code @gelu_fwd_0 kernel "gelu_fwd" {source = ""}
}

// -----

module {
  exec.template stage 0 {
    exec.buffer @x : tensor<4xf32> workspace at -1
    exec.buffer @y : tensor<4xf32> workspace at -1
    exec.program @main microbatch {
      // expected-error @+1 {{with generated code needs a grid and a block of three dimensions each}}
      exec.launch "copy" (@x) -> (@y) args {} {code = "copy_0", block = array<i64: 256>}
    }
  }
  exec.code @copy_0 kernel "copy" {source = ""}
}

// -----

// A fused group's members follow it: launches of the catalog, without code
// of their own, as many as it says.
module {
  exec.template stage 0 {
    exec.buffer @x : tensor<32xf32> workspace at 0
    exec.buffer @y : tensor<32xf32> workspace at 128
    exec.program @main microbatch {
      // expected-error @+1 {{fuses 3 launches, but instruction 2 after it is not a launch of the catalog under the same condition without code, launch shape or fusion of its own}}
      exec.launch "gelu_fwd" (@x) -> (@y) args {} fuses 3
      exec.launch "gelu_fwd" (@y) -> (@x) args {}
    }
  }
}

// -----

module {
  exec.template stage 0 {
    exec.buffer @x : tensor<32xf32> workspace at 0
    exec.buffer @y : tensor<32xf32> workspace at 128
    exec.program @main microbatch {
      // expected-error @+1 {{fuses 1 launches: a fused group has two or more}}
      exec.launch "gelu_fwd" (@x) -> (@y) args {} fuses 1
    }
  }
}
