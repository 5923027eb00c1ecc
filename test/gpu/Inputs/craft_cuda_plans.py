"""Plans of the cuda target crafted to be refused by the GPU, not by the
loader: each passes every check a plan load makes and is refused when the
cuda backend meets the device, with one error line and exit status 1.

  craft_cuda_plans.py SCHEMA CUDA.plan

CUDA.plan is a one-rank plan of the cuda target. Prints, per case, the
case's name and strata-run's error line.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "runtime", "Inputs"))
import refusal  # noqa: E402
from plan_json import PlanJson  # noqa: E402

schema, cuda_path = sys.argv[1:3]
plans = PlanJson(schema, tempfile.mkdtemp(prefix="strata-craft-cuda-"))
source = plans.decode(cuda_path)


def case(name, mutate):
    path = plans.craft(name, source, mutate)
    flags = ["--backend", "cuda", "--train-iters", "1"]
    print(f"{name}: {refusal.refused(name, path, flags)}")


def break_ptx(plan):
    # PTX that parses up to an instruction no GPU has: the driver's JIT
    # refuses the module and says where.
    code = plan["code"][0]
    assert "ret;" in code["ptx"]
    code["ptx"] = code["ptx"].replace("ret;", "ret.nowhere;", 1)


case("ptx-does-not-load", break_ptx)
# An architecture no GPU has (compute capability 9.9).
case("architecture-the-gpu-lacks", lambda p: p.update(cuda_arch="sm_99a"))
# Arenas past any GPU's memory, refused before anything is allocated.
case("arena-larger-than-the-gpu",
     lambda p: p["templates"][0].update(persistent_bytes=1 << 45))
print("refused every crafted cuda plan cleanly")
