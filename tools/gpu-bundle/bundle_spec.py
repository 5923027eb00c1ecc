"""What the GPU bundle holds: its plans, the CPU references they are held
to, and the run settings of each, written once. make_bundle.py builds
from it; the bundle's manifest.json carries it to check; test/gpu's
craft_cuda_plans.py crafts the same refusals."""

ARCHS = ["sm_80", "sm_90a"]
BINARIES = ["strata-run", "kernel-tests", "strata-kernels"]

# English text the correctness runs train on (its bytes are the tokens).
DATA = "data/text.txt"
DATA_SOURCES = ["/usr/share/games/fortunes/fortunes", "/usr/share/games/fortunes/literature",
                "/usr/share/games/fortunes/riddles"]

# strata-run's flags per kind of run; {data} is the bundle's text.
RUNS = {
    # parity.py's: five AdamW steps compared number for number.
    "fp32": ["--seed", "11", "--lr", "1e-3", "--clip-grad", "1.0", "--adam-eps", "1e-6",
             "--data-path", "{data}"],
    # bf16_curve.py's: 200 iterations with warm-up and cosine decay (the
    # decay length fixed, so a shorter run follows the same curve).
    "curve": ["--seed", "3", "--lr", "6e-4", "--lr-warmup-iters", "20", "--lr-decay-style",
              "cosine", "--min-lr", "6e-5", "--lr-decay-iters", "200", "--data-path", "{data}"],
    # Throughput: synthetic tokens.
    "bench": ["--seed", "1", "--lr", "1e-4"],
}

TINY = ["--micro-batch-size", "2", "--global-batch-size", "16"]
CURVE = ["--micro-batch-size", "8", "--global-batch-size", "16"]
T2_SP = ["--tensor-model-parallel-size", "2", "--sequence-parallel"]
D2_DISTOPT = ["--data-parallel-size", "2", "--use-distributed-optimizer"]
P2_INTERLEAVED = ["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"]
C2 = ["--context-parallel-size", "2"]
LAYOUTS = [("1", []), ("t2-sp", T2_SP), ("d2-distopt", D2_DISTOPT), ("p2-interleaved", P2_INTERLEAVED),
           ("t2p2d2", T2_SP + D2_DISTOPT + P2_INTERLEAVED)]
GPT_1_3B = ["--set", "layers=24", "--set", "hidden=2048", "--set", "heads=16", "--set", "seq=2048"]


def ranks(flags):
    size = 1
    for flag in ("--tensor-model-parallel-size", "--data-parallel-size",
                 "--pipeline-model-parallel-size", "--context-parallel-size"):
        if flag in flags:
            size *= int(flags[flags.index(flag) + 1])
    return size


def _plans():
    plans = []
    for name, layout in LAYOUTS:
        plans.append(dict(name=f"gpt-tiny-fp32-{name}", model="gpt-tiny", compile=TINY + layout,
                          kind="fp32", run="fp32", iterations=5, reference="gpt-tiny-fp32"))
    # Context parallelism on llama-tiny (grouped-query): the ring (its
    # shifts over NCCL on the context stream) and the keys gathered.
    for name, layout in LAYOUTS[:2] + [("c2", C2),
                                       ("c2-gathered", C2 + ["--cp-comm-type", "all_gather"])]:
        plans.append(dict(name=f"llama-tiny-fp32-{name}", model="llama-tiny", compile=TINY + layout,
                          kind="fp32", run="fp32", iterations=5, reference="llama-tiny-fp32"))
    for name, layout in LAYOUTS:
        # The interleaved schedule with d=2 needs two microbatches a rank:
        # smaller ones, the same global batch (the same curve).
        batch = CURVE if name != "t2p2d2" else ["--micro-batch-size", "4", "--global-batch-size", "16"]
        plans.append(dict(name=f"gpt-tiny-bf16-{name}", model="gpt-tiny",
                          compile=batch + ["--bf16"] + layout, kind="bf16", run="curve",
                          iterations=200, reference="gpt-tiny-fp32-curve"))
    # Grouped-query attention (cuDNN's backward sums the key and value
    # gradients of a group; strata's kernels do it their way).
    # With the ring: its steps' attention on tensor cores, masked by places
    # in the sequence (cuDNN's, under auto, takes step 0 only).
    for name, layout in (("1", []), ("c2", C2)):
        plans.append(dict(name=f"llama-tiny-bf16-{name}", model="llama-tiny",
                          compile=CURVE + ["--bf16"] + layout, kind="bf16", run="curve",
                          iterations=200, reference="llama-tiny-fp32-curve"))
    # --quick's: two layers, a smaller batch, fewer iterations (a check
    # without a GPU runs them on simt, a model of a GPU on the CPU).
    quick = ["--set", "layers=2", "--micro-batch-size", "2", "--global-batch-size", "4"]
    for name, layout in LAYOUTS[:2]:
        plans.append(dict(name=f"gpt-tiny-quick-fp32-{name}", model="gpt-tiny",
                          compile=quick + layout, kind="fp32", run="fp32", iterations=3,
                          reference="gpt-tiny-quick-fp32", quick=True))
    plans.append(dict(name="gpt-tiny-quick-bf16-1", model="gpt-tiny",
                      compile=["--set", "layers=2", "--micro-batch-size", "4",
                               "--global-batch-size", "4", "--bf16"],
                      kind="bf16", run="curve", iterations=10, reference="gpt-tiny-quick-fp32-curve",
                      quick=True))
    # One layer, one microbatch: what compute-sanitizer runs an iteration of.
    plans.append(dict(name="gpt-tiny-1layer", model="gpt-tiny",
                      compile=["--set", "layers=1", "--micro-batch-size", "2",
                               "--global-batch-size", "2"],
                      kind="sanitizer", run="fp32", iterations=1))
    plans.append(dict(name="gpt2-124m-bf16", model="gpt2-124m",
                      compile=["--bf16", "--micro-batch-size", "8", "--global-batch-size", "8"],
                      kind="bench", run="bench", iterations=12, layers=12, hidden=768, heads=12,
                      seq=1024, vocab=50257, batch=8))
    plans.append(dict(name="gpt-1.3b-bf16", model="gpt2-124m",
                      compile=GPT_1_3B + ["--bf16", "--micro-batch-size", "4",
                                          "--global-batch-size", "4"],
                      kind="bench", run="bench", iterations=6, layers=24, hidden=2048, heads=16,
                      seq=2048, vocab=50257, batch=4))
    # strata's attention at the shapes gpu_peers.py times SDPA at (hidden
    # 2048, 16384 tokens a batch): one layer, its kernels' device times.
    for dim in (64, 128):
        for seq in (2048, 4096):
            batch = 16384 // seq
            plans.append(dict(name=f"attention-d{dim}-s{seq}", model="gpt2-124m",
                              compile=["--set", "layers=1", "--set", "hidden=2048", "--set",
                                       f"heads={2048 // dim}", "--set", f"seq={seq}", "--bf16",
                                       "--micro-batch-size", str(batch), "--global-batch-size",
                                       str(batch)],
                              kind="attention", run="bench", iterations=3, dim=dim, seq=seq,
                              batch=batch, heads=2048 // dim))
    for plan in plans:
        plan["ranks"] = ranks(plan["compile"])
        plan.setdefault("quick", False)
    return plans


PLANS = _plans()

# The one-device CPU runs the correctness plans are held to.
REFERENCES = [
    dict(name="gpt-tiny-fp32", model="gpt-tiny", compile=TINY, run="fp32", iterations=5),
    dict(name="llama-tiny-fp32", model="llama-tiny", compile=TINY, run="fp32", iterations=5),
    # bf16 follows the fp32 curve within 2%: its losses only.
    dict(name="gpt-tiny-fp32-curve", model="gpt-tiny", compile=CURVE, run="curve", iterations=200,
         params=False),
    dict(name="llama-tiny-fp32-curve", model="llama-tiny", compile=CURVE, run="curve",
         iterations=200, params=False),
    dict(name="gpt-tiny-quick-fp32", model="gpt-tiny",
         compile=["--set", "layers=2", "--micro-batch-size", "2", "--global-batch-size", "4"],
         run="fp32", iterations=3),
    dict(name="gpt-tiny-quick-fp32-curve", model="gpt-tiny",
         compile=["--set", "layers=2", "--micro-batch-size", "4", "--global-batch-size", "4"],
         run="curve", iterations=10, params=False),
]


def _break_ptx(plan):
    # PTX that parses up to an instruction no GPU has: the driver's JIT
    # refuses the module and says where.
    code = plan["code"][0]
    assert "ret;" in code["ptx"]
    code["ptx"] = code["ptx"].replace("ret;", "ret.nowhere;", 1)


# Plans a GPU must refuse with one error line and exit status 1.
REFUSAL_SOURCE = "gpt-tiny-1layer"
REFUSALS = [
    dict(name="ptx-does-not-load", mutate=_break_ptx,
         expect=r"the plan's PTX for kernel \S+ does not load: .*cuModuleLoadDataEx"),
    # An architecture no GPU has (compute capability 9.9).
    dict(name="architecture-the-gpu-lacks", mutate=lambda p: p.update(cuda_arch="sm_99a"),
         expect=r"the plan was compiled for sm_99a \(compute capability 9\.9 only\); this GPU is"),
    # Arenas past any GPU's memory, refused before anything is allocated.
    dict(name="arena-larger-than-the-gpu",
         mutate=lambda p: p["templates"][0].update(persistent_bytes=1 << 45),
         expect=r"rank 0 needs 32\.00 TiB .* free"),
]

# Files of the source tree that travel: (source, place in the bundle).
FILES = [
    ("tools/gpu-bundle/check", "check"),
    ("tools/gpu-bundle/README.md", "README.md"),
    ("bench/gpu_peers.py", "bench/gpu_peers.py"),
    ("bench/gpu_kernel_peers.py", "bench/gpu_kernel_peers.py"),
    ("test/e2e/torch_models.py", "bench/torch_models.py"),
]

