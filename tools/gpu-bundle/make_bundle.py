"""make gpu-bundle: dist/strata-gpu/, everything a GPU node needs to check
and measure strata with no LLVM, MPI, network or package of this machine.

  make_bundle.py --build BUILD --source ROOT --out DIST/strata-gpu

What goes in (docs/gpu.md says why):
  bin/       strata-run, kernel-tests and strata-kernels, rpath
             $ORIGIN/../lib, stripped
  lib/       every library they need that a GPU node's base image lacks
  plans/ARCH/*.plan   compiled here for sm_80 and sm_90a (bundle_spec.py)
  ref/       the CPU's losses and parameters for each correctness plan
  plans/refusals/     plans a GPU must refuse
  data/      the text the correctness runs train on
  check, README.md, bench/ (the PyTorch peers), manifest.json, SHA256SUMS
and beside it DIST/strata-gpu.tar.xz.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bundle_spec as spec  # noqa: E402

# Libraries every glibc system has: never shipped (the loader, libc and
# its parts). Everything else a binary needs travels in lib/.
SYSTEM = {"linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libdl.so.2",
          "libpthread.so.0", "librt.so.1", "libgcc_s.so.1"}
# What travels to a node is the tar.xz, beside the repository's tracked
# files (3 MiB) and gpu-parity.tar.xz, and the device tool carries 64 MiB in
# all: the packed bundle stays under 48. The folder itself (plans are PTX
# text, which packs about 7 to 1) has no such bound.
MAX_PACKED_BYTES = 48 << 20

# OpenBLAS (37 MB, a kernel for every CPU) gives way to the reference BLAS
# (0.4 MB): on a GPU node the CPU's gemms serve only the kernel tests' cpu
# side and the simt backend, where speed does not matter.
BLAS_SWAP = ("libopenblas.so.0", "libblas.so.3", "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3")


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        sys.exit(f"make_bundle: {' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def resolved_libraries(binary):
    """soname -> path, for every library ldd resolves for `binary`."""
    libs = {}
    for line in run(["ldd", binary]).splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m:
            if m[2] == "not":
                sys.exit(f"make_bundle: {binary} needs {m[1]}, which this machine lacks")
            libs[m[1]] = os.path.realpath(m[2])
    return libs


def direct_needs(path):
    """The sonames an ELF file names as NEEDED."""
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", path]))


def copy_binaries(args, out):
    """The binaries, each library they need (directly or through another)
    beside them in lib/, but the system's own and OpenBLAS (BLAS_SWAP)."""
    bin_dir, lib_dir = os.path.join(out, "bin"), os.path.join(out, "lib")
    os.makedirs(bin_dir)
    os.makedirs(lib_dir)
    where = {BLAS_SWAP[1]: BLAS_SWAP[2]}
    pending = []
    for name in spec.BINARIES:
        source = os.path.join(args.build, "bin", name)
        target = os.path.join(bin_dir, name)
        shutil.copy2(source, target)
        run(["strip", "--strip-unneeded", target])
        run(["patchelf", "--set-rpath", "$ORIGIN/../lib", target])
        for soname, path in resolved_libraries(source).items():
            where.setdefault(soname, path)
        if BLAS_SWAP[0] in direct_needs(target):
            run(["patchelf", "--replace-needed", BLAS_SWAP[0], BLAS_SWAP[1], target])
        pending += direct_needs(target)
    shipped = set()
    while pending:
        soname = pending.pop()
        if soname in SYSTEM or soname in shipped:
            continue
        if soname not in where:
            sys.exit(f"make_bundle: nothing resolves {soname}")
        target = os.path.join(lib_dir, soname)
        shutil.copy2(where[soname], target)
        os.chmod(target, 0o755)
        run(["strip", "--strip-unneeded", target])
        run(["patchelf", "--set-rpath", "$ORIGIN", target])
        shipped.add(soname)
        pending += direct_needs(target)
    return sorted(shipped)


def compile_plan(args, model, flags, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    run([os.path.join(args.build, "bin", "strata-compile"),
         os.path.join(args.source, "examples", model + ".model"), "-o", path] + flags)


def compile_plans(args, out):
    """Every plan of bundle_spec for each architecture, --jobs at a time."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        jobs = [pool.submit(compile_plan, args, plan["model"],
                            plan["compile"] + ["--target", "cuda", "--cuda-arch", arch],
                            os.path.join(out, "plans", arch, plan["name"] + ".plan"))
                for arch in spec.ARCHS for plan in spec.PLANS]
        for job in jobs:
            job.result()


def cpu_references(args, out, work):
    """The one-device CPU run each correctness plan is held to: losses per
    iteration and the saved parameters (and the starting parameters, which
    tell the parameters no gradient moves)."""
    ref_dir = os.path.join(out, "ref")
    os.makedirs(ref_dir)
    strata_run = os.path.join(args.build, "bin", "strata-run")
    data = os.path.join(out, spec.DATA)
    refs = {}
    for ref in spec.REFERENCES:
        plan = os.path.join(work, ref["name"] + ".plan")
        compile_plan(args, ref["model"], ref["compile"], plan)
        params = os.path.join(ref_dir, ref["name"] + ".safetensors")
        flags = [a.replace("{data}", data) for a in spec.RUNS[ref["run"]]]
        log = run([strata_run, plan, "--backend", "cpu", "--train-iters", str(ref["iterations"])]
                  + flags + (["--save-params", params] if ref.get("params", True) else []))
        losses = [float(x) for x in re.findall(r"lm loss: (\S+)", log)]
        if len(losses) != ref["iterations"]:
            sys.exit(f"make_bundle: reference {ref['name']}: {len(losses)} losses\n{log}")
        entry = {"losses": losses}
        if ref.get("params", True):
            start = os.path.join(ref_dir, ref["name"] + ".start.safetensors")
            seed = flags[flags.index("--seed") + 1]
            run([strata_run, plan, "--backend", "cpu", "--seed", seed, "--save-params", start])
            entry["params"] = "ref/" + ref["name"] + ".safetensors"
            entry["start"] = "ref/" + ref["name"] + ".start.safetensors"
        refs[ref["name"]] = entry
        with open(os.path.join(ref_dir, ref["name"] + ".json"), "w") as f:
            json.dump(entry, f, indent=1)
    return refs


def crafted_refusals(args, out, work):
    """Plans a GPU must refuse (bundle_spec.REFUSALS), crafted here where
    flatc is."""
    sys.path.insert(0, os.path.join(args.source, "test", "runtime", "Inputs"))
    from plan_json import PlanJson
    source_plan = os.path.join(out, "plans", spec.ARCHS[0], spec.REFUSAL_SOURCE + ".plan")
    plans = PlanJson(os.path.join(args.source, "runtime", "plan", "plan.fbs"), work)
    decoded = plans.decode(source_plan)
    os.makedirs(os.path.join(out, "plans", "refusals"))
    for case in spec.REFUSALS:
        crafted = plans.craft(case["name"], decoded, case["mutate"])
        shutil.copy2(crafted, os.path.join(out, "plans", "refusals", case["name"] + ".plan"))


def write_manifest(out, libs, refs):
    manifest = {
        "format": 1,
        "commit": run(["git", "-C", HERE, "rev-parse", "HEAD"]).strip(),
        "archs": spec.ARCHS,
        "binaries": spec.BINARIES,
        "libraries": libs,
        "data": spec.DATA,
        "runs": spec.RUNS,
        "plans": spec.PLANS,
        "references": refs,
        "refusals": [{k: v for k, v in case.items() if k != "mutate"} for case in spec.REFUSALS],
    }
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    sums = []
    for folder, _, files in sorted(os.walk(out)):
        for name in sorted(files):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, out)
            if rel == "SHA256SUMS":
                continue
            with open(path, "rb") as f:
                sums.append(f"{hashlib.sha256(f.read()).hexdigest()}  {rel}")
    with open(os.path.join(out, "SHA256SUMS"), "w") as f:
        f.write("\n".join(sums) + "\n")


def folder_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = p.parse_args()
    args.build, args.source, out = (os.path.abspath(x) for x in (args.build, args.source, args.out))
    for tool in ("patchelf", "strip", "flatc", "xz"):
        if not shutil.which(tool):
            sys.exit(f"make_bundle: needs {tool} (make deps installs it)")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    work = os.path.join(os.path.dirname(out), ".bundle-work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    libs = copy_binaries(args, out)
    os.makedirs(os.path.join(out, "data"))
    with open(os.path.join(out, spec.DATA), "wb") as f:
        for text in spec.DATA_SOURCES:
            with open(text, "rb") as source:
                f.write(source.read())
    compile_plans(args, out)
    refs = cpu_references(args, out, work)
    crafted_refusals(args, out, work)
    for source, target in spec.FILES:
        os.makedirs(os.path.dirname(os.path.join(out, target)), exist_ok=True)
        shutil.copy2(os.path.join(args.source, source), os.path.join(out, target))
    os.chmod(os.path.join(out, "check"), 0o755)
    write_manifest(out, libs, refs)
    shutil.rmtree(work, ignore_errors=True)

    size = folder_bytes(out)
    tarball = out + ".tar.xz"
    with tarfile.open(tarball, "w:xz") as tar:
        tar.add(out, arcname=os.path.basename(out))
    packed = os.path.getsize(tarball)
    if packed > MAX_PACKED_BYTES:
        os.remove(tarball)
        sys.exit(f"make_bundle: the packed bundle is {packed / 2**20:.1f} MiB, over its "
                 f"{MAX_PACKED_BYTES >> 20} MiB")
    print(f"{out}: {size / 2**20:.1f} MiB in {sum(len(f) for _, _, f in os.walk(out))} files "
          f"({len(spec.PLANS) * len(spec.ARCHS)} plans, {len(libs)} libraries: {', '.join(libs)})")
    print(f"{tarball}: {packed / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
