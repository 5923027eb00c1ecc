"""The runtime's floors, checked: every file under runtime/ includes only
its own folder and the folders its CMake library links, directly or
through others; the libraries link without a cycle; nothing under runtime/
includes the compiler's side (LLVM, MLIR, frontend/, dialects/, compiler/,
tools/). The order is written once, in runtime/CMakeLists.txt's
target_link_libraries; this reads it from there.

  check_floors.py RUNTIME_DIR   prints each folder and what it may include,
                                then every violation; exit 1 if any."""
import os
import re
import sys

root = sys.argv[1]
cmake = open(os.path.join(root, "CMakeLists.txt")).read()

# add_library(StrataX ${STRATA_FOO_SOURCES}) ties library StrataX to folder foo.
folder_of = {}
for lib, var in re.findall(r"add_library\((Strata\w+)\s+\$\{STRATA_(\w+)_SOURCES\}\)", cmake):
    folder_of[lib] = var.lower()
links = {}
for lib, rest in re.findall(r"target_link_libraries\((Strata\w+)\s+PUBLIC\s+([^)]*)\)", cmake):
    links.setdefault(lib, []).extend(w for w in rest.split() if w in folder_of)

folders = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
problems = []
for folder in folders:
    if folder not in folder_of.values():
        problems.append(f"runtime/{folder}/ has no library of its own in CMakeLists.txt")


def below(lib, path=()):
    """The folders `lib` links, transitively; a cycle is a problem."""
    out = set()
    for dep in links.get(lib, []):
        if dep in path or dep == lib:
            problems.append("the libraries link in a cycle: " + " -> ".join(path + (lib, dep)))
            continue
        out.add(folder_of[dep])
        out |= below(dep, path + (lib,))
    return out


allowed = {folder: below(lib) for lib, folder in folder_of.items()}
# Bottom up: a folder after everything it may include.
for folder in sorted(folders, key=lambda f: (len(allowed.get(f, ())), f)):
    print(f"{folder}: {' '.join(sorted(allowed.get(folder, ()))) or '(nothing)'}")

include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
foreign = re.compile(r'^\s*#\s*include\s+[<"](llvm|mlir|frontend|dialects|compiler|tools)/', re.M)
for folder in folders:
    for dirpath, _, names in os.walk(os.path.join(root, folder)):
        for name in sorted(names):
            if not name.endswith((".h", ".cpp", ".def", ".inc")):
                continue
            path = os.path.join(dirpath, name)
            shown = os.path.relpath(path, os.path.dirname(root))
            text = open(path, encoding="utf-8").read()
            for m in foreign.finditer(text):
                problems.append(f"{shown} includes {m.group(1)}/: the runtime has no LLVM, MLIR or compiler")
            for target in include.findall(text):
                parts = target.split("/")
                if parts[0] != "runtime" or len(parts) < 3:
                    continue
                other = parts[1]
                if other != folder and other not in allowed.get(folder, ()):
                    problems.append(f"{shown} includes {target}: {folder}/ is not above {other}/")

for problem in problems:
    print("error: " + problem)
print(f"{len(problems)} problem(s)")
sys.exit(1 if problems else 0)
