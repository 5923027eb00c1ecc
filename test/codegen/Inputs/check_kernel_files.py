"""Checks that every kernel of the catalog (runtime/plan/Kernels.def) can be
found from its entry: the `// Where:` lines above each run of kernels name
the family's CUDA emitter, CPU twin and float64 test, and each named file
must exist and name the kernel (emit<Name> or KernelId::<Name> in the
emitter, run<Name>( in the CPU twin, <Name> or "<name>" in the test).

  check_kernel_files.py ROOT [DEF]   (DEF: ROOT/runtime/plan/Kernels.def)
"""
import os
import re
import sys

ROLES = {"emitter": r"\bemit{N}\b|\bKernelId::{N}\b",
         "CPU twin": r"\brun{N}\(",
         "float64 test": r"\b{N}\b|\"{n}\""}


def main():
    root = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        root, "runtime", "plan", "Kernels.def")
    lines = open(path, encoding="utf-8").read().split("\n")
    problems, where, kernels, texts = [], None, 0, {}
    for i, line in enumerate(lines):
        if line.startswith("// Where:"):
            block = " ".join(lines[i:i + 3])
            where = dict((role, file) for file, role in re.findall(
                r"(\S+) \((emitter|CPU twin|float64 test)\)", block))
            missing = [r for r in ROLES if r not in where]
            if missing:
                problems.append("%s:%d: a Where: without its %s" %
                                (path, i + 1, ", ".join(missing)))
            continue
        match = re.match(r'KERNEL\((\w+), "(\w+)"\)', line)
        if not match:
            continue
        kernels += 1
        name, text = match.groups()
        if where is None:
            problems.append("%s:%d: kernel %s has no Where: above it" %
                            (path, i + 1, name))
            continue
        for role, pattern in ROLES.items():
            file = where.get(role)
            if not file:
                continue
            full = os.path.join(root, file)
            if not os.path.isfile(full):
                problems.append("kernel %s: its %s %s does not exist" %
                                (name, role, file))
                continue
            if full not in texts:
                texts[full] = open(full, encoding="utf-8").read()
            if not re.search(pattern.format(N=name, n=text), texts[full]):
                problems.append("kernel %s: its %s %s does not name it" %
                                (name, role, file))
    for problem in problems:
        print(problem)
    if problems or kernels == 0:
        print("%d problems in %d kernels" % (len(problems), kernels))
        return 1
    print("%d kernels: emitter, CPU twin and float64 test found for each" %
          kernels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
