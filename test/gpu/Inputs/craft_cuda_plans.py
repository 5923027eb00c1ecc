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

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools",
                                "gpu-bundle"))
import bundle_spec  # noqa: E402

schema, cuda_path = sys.argv[1:3]
plans = PlanJson(schema, tempfile.mkdtemp(prefix="strata-craft-cuda-"))
source = plans.decode(cuda_path)

# The cases are the GPU bundle's (tools/gpu-bundle/bundle_spec.py), crafted
# there too for its check.
for case in bundle_spec.REFUSALS:
    path = plans.craft(case["name"], source, case["mutate"])
    flags = ["--backend", "cuda", "--train-iters", "1"]
    print(f"{case['name']}: {refusal.refused(case['name'], path, flags)}")
print("refused every crafted cuda plan cleanly")
