"""Crafted plans: a good plan decoded to JSON (flatc), one value changed,
encoded back and framed with a valid checksum, so that only the loader's
value checks stand between it and the runtime. strata-run must refuse each
with one error line and exit status 1: never a crash, a hang or a write
outside its memory.

  craft_plans.py SCHEMA PIPELINE.plan TENSOR.plan CUDA.plan

PIPELINE.plan is a two-stage plan of one rank per stage (two templates that
share the tied embedding; it has a stash); TENSOR.plan a two-rank
tensor-parallel plan (one template, with per-rank values); CUDA.plan a
plan of the cuda target (generated kernels), which the CPU backend runs.
Prints, per case, the case's name and strata-run's error line.
"""
import sys
import tempfile

import refusal
from plan_json import PlanJson

schema, pipeline_path, tensor_path, cuda_path = sys.argv[1:5]
plans = PlanJson(schema, tempfile.mkdtemp(prefix="strata-craft-"))


def refused(name, path, flags=("--train-iters", "1")):
    print(f"{name}: {refusal.refused(name, path, flags)}")


pipeline = plans.decode(pipeline_path)
tensor = plans.decode(tensor_path)
cuda = plans.decode(cuda_path)


def first(items, predicate):
    return next(i for i, item in enumerate(items) if predicate(item))


def case(name, source, mutate, check_too=False):
    path = plans.craft(name, source, mutate)
    refused(name, path)
    if check_too:  # strata-run --check checks a template's later ranks apart
        refused(name + " (--check)", path, ["--check"])


rank0 = lambda p: p["templates"][0]


def stash_buffer(p):
    buffers = rank0(p)["buffers"]
    return buffers[first(buffers, lambda b: b["arena"] == "Stash")]


def first_launch(p, kernel):
    k = p["kernels"].index(kernel)
    for program in rank0(p)["programs"]:
        for instruction in program["instructions"]:
            if instruction["op_type"] == "Launch" and instruction["op"]["kernel"] == k:
                return instruction["op"]
    raise KeyError(kernel)


# Memory: arenas larger than the machine holds.
case("arena-larger-than-memory", pipeline,
     lambda p: rank0(p).update(persistent_bytes=1 << 45))
# Shapes: element counts that overflow, dimensions that are not positive.
case("shape-overflows", pipeline,
     lambda p: rank0(p)["buffers"][0].update(shape=[1 << 31, 1 << 31, 1 << 31]))
case("shape-negative", pipeline,
     lambda p: rank0(p)["buffers"][0].update(shape=[-4, 8]))
# Offsets: a buffer past its arena, offset + size wrapping around.
case("buffer-outside-arena", pipeline,
     lambda p: rank0(p)["buffers"][0].update(offset=rank0(p)["persistent_bytes"]))
case("offset-wraps", pipeline,
     lambda p: rank0(p)["buffers"][0].update(offset=(1 << 64) - 64))
# The stash: a slot stride that wraps, a schedule slot past the arena.
case("slot-stride-wraps", pipeline,
     lambda p: stash_buffer(p).update(slot_stride=(1 << 63) + 64))
# A stash buffer in a pool the steps give no slot; a slot below -1.
case("pool-without-slot", pipeline,
     lambda p: stash_buffer(p).update(stash_pool="Held"))
case("slot-negative", pipeline, lambda p: rank0(p)["schedule"][0].update(slot=-5))
case("slot-past-stash", pipeline,
     lambda p: next(s for s in rank0(p)["schedule"]
                    if s["slot"] >= 0).update(slot=1 << 30))
# Names: buffers, parameters, programs, io twice.
case("duplicate-buffer", pipeline,
     lambda p: rank0(p)["buffers"][1].update(name=rank0(p)["buffers"][0]["name"]))
case("duplicate-parameter", pipeline,
     lambda p: rank0(p)["params"][1].update(name=rank0(p)["params"][0]["name"]))
case("duplicate-program", pipeline,
     lambda p: rank0(p)["programs"][1].update(name=rank0(p)["programs"][0]["name"]))
case("duplicate-io", pipeline,
     lambda p: rank0(p)["io"][1].update(name=rank0(p)["io"][0]["name"]))
# Templates that disagree about a parameter they share (the tied
# embedding of both stages).
case("templates-disagree", pipeline,
     lambda p: [q["global_shape"].__setitem__(0, 7)
                for q in p["templates"][1]["params"] if q["name"] == "wte"])
# The rank map: a template the plan does not hold, a map of the wrong
# size, a rank given another stage's template.
case("rank-map-missing-template", pipeline,
     lambda p: p["rank_templates"].__setitem__(1, 5))
case("rank-map-wrong-size", pipeline, lambda p: p.update(rank_templates=[0]))
case("rank-map-wrong-stage", pipeline, lambda p: p.update(rank_templates=[0, 0]))
# A pipeline's last stage without its labels (it would score a buffer
# nothing writes), its first without its tokens.
case("last-stage-without-labels", pipeline,
     lambda p: p["templates"][1].update(
         io=[e for e in p["templates"][1]["io"] if e["name"] != "labels"]))
case("first-stage-without-tokens", pipeline,
     lambda p: rank0(p).update(io=[e for e in rank0(p)["io"] if e["name"] != "tokens"]))
# Per-rank values: a view that moves past its arena on rank 1, a mesh axis
# that does not exist.
case("per-rank-outside-arena", tensor,
     lambda p: rank0(p)["buffers"][0].update(
         per_rank={"axis": 0, "stride": rank0(p)["persistent_bytes"]}),
     check_too=True)
case("per-rank-argument-off-its-shard", tensor,
     lambda p: first_launch(p, "logits_max")["attrs"][1].update(
         per_rank={"axis": 0, "stride": 1}),
     check_too=True)
case("per-rank-bad-axis", tensor,
     lambda p: rank0(p)["buffers"][0].update(per_rank={"axis": 7, "stride": 64}))
# A vocabulary larger than the loss's logits: labels past its columns.
case("vocabulary-larger-than-logits", tensor, lambda p: p.update(vocab_size=4096))
# Indices: a launch's operand, kernel, group, event, location, program.
case("operand-out-of-range", pipeline,
     lambda p: first_launch(p, "layer_norm_fwd")["operands"].__setitem__(0, 1 << 30),
     check_too=True)
case("kernel-out-of-range", pipeline,
     lambda p: first_launch(p, "layer_norm_fwd").update(kernel=len(p["kernels"])))
case("unknown-kernel", pipeline,
     lambda p: p["kernels"].__setitem__(p["kernels"].index("layer_norm_fwd"), "layer_norm_fast"))
case("operand-wrong-dtype", pipeline,
     lambda p: first_launch(p, "layer_norm_fwd")["operands"].__setitem__(
         0, first(rank0(p)["buffers"], lambda b: b["dtype"] == "I32")))
case("argument-missing", pipeline,
     lambda p: first_launch(p, "layer_norm_fwd").update(attrs=[]))
case("group-out-of-range", tensor,
     lambda p: next(i for prog in rank0(p)["programs"] for i in prog["instructions"]
                    if i["op_type"] == "Collective")["op"].update(group=99))
case("group-bad-axes", tensor, lambda p: p["groups"][0].update(axes=[1, 0]))
# A shift (the ring's) into the bytes it sends from.
case("shift-in-place", tensor,
     lambda p: (lambda c: c.update(kind="Shift", output=c["input"]))(
         next(i for prog in rank0(p)["programs"] for i in prog["instructions"]
              if i["op_type"] == "Collective")["op"]))
case("context-uncut", tensor, lambda p: p.update(context_parallel=3))
case("event-out-of-range", pipeline, lambda p: rank0(p).update(events=0))
case("location-out-of-range", pipeline,
     lambda p: rank0(p)["programs"][0]["instructions"][0].update(location=1 << 20))
case("schedule-program-out-of-range", pipeline,
     lambda p: rank0(p)["schedule"][0].update(program=99))
case("microbatch-out-of-range", pipeline,
     lambda p: rank0(p)["schedule"][0].update(microbatch=99))

# Integer arguments past any buffer's extent, which the shape rules'
# arithmetic would wrap on: a query head offset of 2^63 - 1, a slice of
# 2^58 + 1 parts (an accumulate turned into a slice of its operands).
case("attention-offset-wraps", pipeline,
     lambda p: first_launch(p, "attention_fwd")["attrs"][2].update(i=(1 << 63) - 1))


def huge_slice(p):
    launch = first_launch(p, "accumulate")
    p["kernels"].append("slice")
    launch.update(kernel=len(p["kernels"]) - 1,
                  attrs=[{"i": 0}, {"i": 1 << 40}, {"i": (1 << 58) + 1}])


case("slice-parts-wrap", pipeline, huge_slice)

# The cuda target: every launch runs its own kernel's compiled code (a
# kernel never fused, so that its launch has code of its own).
case("cuda-launch-without-code", cuda,
     lambda p: first_launch(p, "layer_norm_bwd").update(code=-1))
case("cuda-code-of-another-kernel", cuda,
     lambda p: first_launch(p, "layer_norm_bwd").update(
         code=first(p["code"], lambda c: c["kernel"] == "add")))
case("cuda-code-without-ptx", cuda,
     lambda p: p["code"][first_launch(p, "layer_norm_bwd")["code"]].update(ptx=""))
case("cuda-block-too-large", cuda,
     lambda p: first_launch(p, "layer_norm_bwd").update(block=[2048, 1, 1]))
case("cuda-grid-empty", cuda,
     lambda p: first_launch(p, "layer_norm_bwd").update(grid=[0, 1, 1]))
# CUDA's limits, on every backend (simt would run 2^31 blocks, or give a
# block 4 GiB of shared memory).
case("cuda-grid-past-limits", cuda,
     lambda p: first_launch(p, "layer_norm_bwd").update(grid=[1 << 31, 1, 1]))
case("cuda-grid-y-past-limits", cuda,
     lambda p: first_launch(p, "layer_norm_bwd").update(grid=[1, 65536, 1]))
case("cuda-block-z-past-limits", cuda,
     lambda p: first_launch(p, "layer_norm_bwd").update(block=[1, 1, 128]))
case("cuda-shared-memory-4gib", cuda,
     lambda p: first_launch(p, "layer_norm_bwd").update(shared_bytes=(1 << 32) - 1))
# A kernel's name is its symbol: simt once ran its host compiler through a
# shell with it.
case("cuda-code-name-not-identifier", cuda,
     lambda p: p["code"][first_launch(p, "layer_norm_bwd")["code"]].update(
         name="k';touch pwned;'"))
# A unit's source is pieces the plan's codes share: a piece the plan lacks,
# and one named so many times that the text would be gigabytes.
case("cuda-source-piece-missing", cuda,
     lambda p: p["code"][0].update(source_pieces=[len(p["source_pieces"])]))
case("cuda-source-piece-bomb", cuda,
     lambda p: p["code"][0].update(
         source_pieces=[max(range(len(p["source_pieces"])),
                            key=lambda i: len(p["source_pieces"][i]))] * 100000))


def fused_group(p):
    """The first fused group's launches: the one that fuses, then its
    members."""
    for program in rank0(p)["programs"]:
        code = program["instructions"]
        for i, instruction in enumerate(code):
            if instruction["op_type"] == "Launch" and instruction["op"]["fuse"] > 1:
                return [c["op"] for c in code[i:i + instruction["op"]["fuse"]]]
    raise KeyError("fuse")


def fuse_past_the_end(p):
    # The program's last launch with code of its own (no group's member).
    code = rank0(p)["programs"][0]["instructions"]
    last = max(i for i, c in enumerate(code)
               if c["op_type"] == "Launch" and c["op"]["code"] >= 0)
    code[last]["op"]["fuse"] = 1 << 30


# A fused group: its members follow it in the program, without code of
# their own, and its code is made for them.
case("cuda-fuse-past-the-end", cuda, fuse_past_the_end)
case("cuda-fused-member-with-code", cuda,
     lambda p: fused_group(p)[1].update(code=fused_group(p)[0]["code"]))
case("cuda-fused-member-with-shared-memory", cuda,
     lambda p: fused_group(p)[1].update(shared_bytes=1 << 20))
case("cuda-fused-code-of-another-group", cuda,
     lambda p: fused_group(p)[0].update(fuse=1))
print("refused every crafted plan cleanly")
