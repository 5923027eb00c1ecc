#!/usr/bin/env bash
# make test's run of the GPU bundle (docs/gpu.md): made from this build,
# copied to a folder outside the tree and run from there as a GPU node runs
# it, with the environment cleared and the build and source trees hidden,
# on the simt backend: every step that needs no GPU runs and passes, the
# others say "skipped: no GPU". Then two damaged copies are refused, and
# references moved off strata's results fail the comparison.
#
#   check-bundle.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1")
source=$(realpath "$2")
work=$(mktemp -d /tmp/strata-bundle-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

/usr/bin/python3 "$source/tools/gpu-bundle/make_bundle.py" --build "$build" --source "$source" \
  --out "$work/made/strata-gpu"
cp -r "$work/made/strata-gpu" "$work/node"

# Nothing missing with LD_LIBRARY_PATH empty, nothing taken from the trees.
for binary in "$work"/node/bin/*; do
  env -u LD_LIBRARY_PATH ldd "$binary" >"$work/ldd"
  if grep -q "not found" "$work/ldd"; then cat "$work/ldd"; fail "$binary lacks a library"; fi
  if grep -q -e "$build" -e "$source" "$work/ldd"; then cat "$work/ldd"; fail "$binary loads from the tree"; fi
done
# What travels is the tar.xz (make_bundle.py says why 48 MiB).
packed=$(stat -c %s "$work/made/strata-gpu.tar.xz")
[ "$packed" -le $((48 << 20)) ] || fail "the packed bundle is $packed bytes, over 48 MiB"

# The node: an empty environment, and the trees out of sight where a mount
# namespace can be had (root on Linux); else only the environment cleared.
node_env=(env -i "PATH=/usr/bin:/bin" "HOME=$HOME" "TMPDIR=/tmp")
[ -n "${CCACHE_DIR:-}" ] && node_env+=("CCACHE_DIR=$CCACHE_DIR")
run_on_node() {
  if unshare --mount --propagation private true 2>/dev/null; then
    unshare --mount --propagation private sh -c \
      'mount -t tmpfs none "$1" && mount -t tmpfs none "$2" && shift 2 && exec "$@"' \
      node "$build" "$source" "${node_env[@]}" "$@"
  else
    echo "(no mount namespace here: the trees stay visible, the environment is cleared)"
    "${node_env[@]}" "$@"
  fi
}

cd "$work"
run_on_node "$work/node/check" --quick --out "$work/out" --budget 170 || fail "check --quick failed"
/usr/bin/python3 - "$work/out/summary.json" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
steps = {s["name"]: s for s in summary["steps"]}
assert summary["backend"] == "simt", summary["backend"]
for name in ("environment", "kernels", "one-rank", "layouts", "bf16"):
    assert steps[name]["status"] == "pass", (name, steps[name])
for name in ("sanitizer", "refusals", "benchmarks", "calibration"):
    assert steps[name]["status"] == "skipped" and "no GPU" in steps[name]["summary"], (name, steps[name])
assert "skipped: no GPU" in steps["kernels"]["summary"], steps["kernels"]
# Each launch of the quick bf16 plan timed alone by bin/strata-kernels on
# simt: the step's machinery (a GPU's speeds need a GPU).
assert steps["kernel-speeds"]["status"] == "pass", steps["kernel-speeds"]
assert "on simt" in steps["kernel-speeds"]["summary"], steps["kernel-speeds"]
print("summary.json: every step that needs no GPU passed; the rest skipped: no GPU")
PY
grep -q "^| one-rank | pass |" "$work/out/summary.md" || fail "summary.md lacks the one-rank row"

# Damaged copies: a changed reference; a binary needing a library the
# bundle lacks (this machine has the bundle's own in its system folders,
# so one no machine has). Each fails the environment step, names what is
# wrong and exits 1.
cp -r "$work/made/strata-gpu" "$work/changed"
printf 'x' >>"$work/changed/ref/gpt-tiny-fp32.json"
if run_on_node "$work/changed/check" --steps environment --out "$work/out-changed" >"$work/changed.log"; then
  cat "$work/changed.log"; fail "a changed file passed"
fi
grep -q "differ from SHA256SUMS: ref/gpt-tiny-fp32.json" "$work/changed.log" || { cat "$work/changed.log"; fail "the changed file is not named"; }
cp -r "$work/made/strata-gpu" "$work/partial"
patchelf --add-needed libstrata-nowhere.so.1 "$work/partial/bin/strata-run"
if run_on_node "$work/partial/check" --steps environment --out "$work/out-partial" >"$work/partial.log"; then
  cat "$work/partial.log"; fail "a bundle lacking a library passed"
fi
grep -q "strata-run lacks libstrata-nowhere.so.1" "$work/partial.log" || { cat "$work/partial.log"; fail "the missing library is not named"; }
# References moved off what strata computes (the first loss by 1e-3, the
# embedding by 1e-3): the comparisons must fail, each saying by how much.
cp -r "$work/made/strata-gpu" "$work/moved"
/usr/bin/python3 - "$work/moved" <<'PY'
import array, json, struct, sys
root = sys.argv[1]
manifest = json.load(open(f"{root}/manifest.json"))
manifest["references"]["gpt-tiny-quick-fp32"]["losses"][0] *= 1.001
json.dump(manifest, open(f"{root}/manifest.json", "w"))
path = f"{root}/ref/gpt-tiny-quick-fp32.safetensors"
data = bytearray(open(path, "rb").read())
(length,) = struct.unpack("<Q", data[:8])
begin, end = json.loads(data[8:8 + length])["wte"]["data_offsets"]
values = array.array("f", bytes(data[8 + length + begin:8 + length + end]))
data[8 + length + begin:8 + length + end] = array.array("f", (v * 1.001 for v in values)).tobytes()
open(path, "wb").write(data)
PY
if run_on_node "$work/moved/check" --quick --steps one-rank --out "$work/out-moved" >"$work/moved.log"; then
  cat "$work/moved.log"; fail "references moved off strata's results passed"
fi
grep -q -E "FAIL gpt-tiny-quick-fp32-1 \(graphs\): loss 1\.0e-03, params 1\.0e-03 \(wte\)" "$work/moved.log" ||
  { cat "$work/moved.log"; fail "the moved references are not reported as such"; }
echo "the bundle checks itself from $work/node; damaged copies and moved references are refused"
