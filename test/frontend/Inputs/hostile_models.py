"""Model files a careless or hostile hand writes, each compiled by
strata-compile, which must refuse it in one error with exit status 1:
never a crash (LLVM's "PLEASE submit a bug report"), a hang or success.

  hostile_models.py WORK_DIR

Prints, per case, its name and the error line. The classes: a list where
each op's tensor argument belongs and a tensor where its list belongs
(every op, every argument: the kinds are checked before any op is built);
deep nesting of every kind (parentheses, brackets, unary minus, calls,
chains of operators, a 10 MB one-line expression, repeat blocks).
"""
import os
import subprocess
import sys

work = sys.argv[1]
os.makedirs(work, exist_ok=True)

# The ops, their positional arguments ("list" for a shape or permutation).
OPS = {
    "attention": ["q", "k", "v"],
    "cross_entropy": ["logits", "labels"],
    "embedding": ["table", "ids"],
    "gelu": ["x"],
    "layer_norm": ["x", "weight", "bias"],
    "matmul": ["a", "b"],
    "reshape": ["x", "list"],
    "rms_norm": ["x", "weight"],
    "rope": ["x"],
    "silu": ["x"],
    "transpose": ["x", "list"],
}

HEADER = """model hostile
input tokens: [batch, 8]
input labels: [batch, 8]
param w: [16, 4] = normal(0.02)
x = embedding(w, tokens)
"""
FOOTER = "loss cross_entropy(matmul(x, w, transpose_b=true), labels)\n"

failures = 0


def compile_case(name, text):
    global failures
    path = os.path.join(work, name + ".model")
    with open(path, "w") as f:
        f.write(text)
    try:
        result = subprocess.run(["strata-compile", path], capture_output=True, text=True,
                                timeout=120)
    except subprocess.TimeoutExpired:
        failures += 1
        print(f"{name}: HANG")
        return
    errors = [l for l in result.stderr.splitlines() if "error:" in l]
    bad = result.returncode != 1 or not errors or "PLEASE submit" in result.stderr
    failures += bad
    first = errors[0].split(": error: ", 1)[-1] if errors else result.stderr.strip()[-300:]
    print(f"{name}: {'CRASH or accepted (exit ' + str(result.returncode) + ') ' if bad else ''}{first}")


# A list where a tensor belongs, a tensor where a list belongs.
for op, args in OPS.items():
    for i, kind in enumerate(args):
        values = ["[1, 2]" if kind == "list" else "x" for kind in args]
        values[i] = "x" if kind == "list" else "[1, 2]"
        compile_case(f"{op}-{i}-{'tensor' if kind == 'list' else 'list'}",
                     HEADER + f"y = {op}({', '.join(values)})\n" + FOOTER)

# Nesting of every kind, far past any model's.
n = 5000
compile_case("parentheses", HEADER + "const z = " + "(" * n + "1" + ")" * n + "\n" + FOOTER)
compile_case("brackets", HEADER + "const z = " + "[" * n + "1" + "]" * n + "\n" + FOOTER)
compile_case("unary-minus", HEADER + "const z = " + "-" * n + "1\n" + FOOTER)
compile_case("calls", HEADER + "y = " + "gelu(" * n + "x" + ")" * n + "\n" + FOOTER)
compile_case("operator-chain", HEADER + "y = x" + " + x" * n + "\n" + FOOTER)
compile_case("one-line-10mb", HEADER + "const z = 1" + "+1" * 5_000_000 + "\n" + FOOTER)
compile_case("repeat-blocks", HEADER + "repeat 1 {\n" * n + "}\n" * n + FOOTER)
# Just inside the bound, a deep expression still compiles.
path = os.path.join(work, "deep-but-legal.model")
with open(path, "w") as f:
    f.write(HEADER + "const z = " + "(" * 200 + "1" + ")" * 200 + "\n"
            + "y = x" + " + x" * 200 + "\n" + FOOTER)
result = subprocess.run(["strata-compile", path], capture_output=True, text=True)
failures += result.returncode != 0
print(f"deep-but-legal: exit {result.returncode}")
print(f"{failures} of the cases crashed, hung or were accepted")
sys.exit(1 if failures else 0)
