"""The GPU's own figures for the simulated cluster (issue 26), measured
through PyTorch on the GPU node:

  gpu_machine.py --out MACHINE.json [--quick]

- bf16 gemm rates over shapes: squares from 256 to 8192, sizes just past a
  tile (to show tile and wave quantization), and the per-GPU gemms of the
  paper's Table 1 models (micro-batch 1, sequence 2048, tensor-parallel
  width as in the paper): QKV, attention output, fc1, fc2, forward shapes;
- device-to-device copy bandwidth (bytes read plus bytes written);
- launch overhead: host time per launch of a one-element kernel issued back
  to back, and device time per kernel when a graph of them is replayed.

Times are CUDA-event medians after warm-up, on random data; each gemm
rotates among input sets larger than L2 together so that repeats do not
measure the cache. The simulator's cluster specs mark the launch overhead
as an estimate until a measurement like this replaces it.
"""
import argparse
import json
import statistics
import time

import torch


def median_ms(fn, warmup, repeat):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def gemm_rate(m, n, k, repeat):
    """Median TFLOP/s of [m,k] x [k,n] in bf16, inputs rotated past L2."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    per_set = 2 * (m * k + k * n + m * n)
    sets = max(1, min(8, 1 + 2 * l2 // per_set))
    data = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
             torch.randn(k, n, device="cuda", dtype=torch.bfloat16)) for _ in range(sets)]
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    turn = [0]

    def one():
        a, b = data[turn[0] % sets]
        turn[0] += 1
        torch.matmul(a, b, out=out)
    # Several products per timed region, so that launch gaps do not dominate small ones.
    inner = max(1, min(50, int(2e11 // (2 * m * n * k))))

    def many():
        for _ in range(inner):
            one()
    ms = median_ms(many, 2, repeat) / inner
    return ms, 2 * m * n * k / (ms / 1e3) / 1e12


def table1_shapes():
    # (name, hidden, tensor-parallel width) of the paper's Table 1; sequence 2048, micro-batch 1.
    rows = [("1.7B", 2304, 1), ("3.6B", 3072, 2), ("7.5B", 4096, 4), ("18B", 6144, 8),
            ("39B", 8192, 8), ("76B", 10240, 8), ("145B", 12288, 8), ("310B", 16384, 8),
            ("530B", 20480, 8), ("1T", 25600, 8)]
    tokens = 2048
    for name, h, t in rows:
        yield f"{name} qkv", tokens, 3 * h // t, h
        yield f"{name} proj", tokens, h, h // t
        yield f"{name} fc1", tokens, 4 * h // t, h
        yield f"{name} fc2", tokens, h, 4 * h // t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    torch.manual_seed(0)
    repeat = 5 if args.quick else 15
    props = torch.cuda.get_device_properties(0)
    result = dict(gpu=props.name, sm_count=props.multi_processor_count,
                  l2_bytes=props.L2_cache_size, memory_bytes=props.total_memory,
                  torch=torch.__version__, gemms=[])
    started = time.time()

    shapes = [(f"square {n}", n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192)]
    shapes += [(f"past a tile {n}", n, n, n) for n in (1025, 2049, 4097)]
    shapes += list(table1_shapes())
    for name, m, n, k in shapes:
        ms, tflops = gemm_rate(m, n, k, repeat)
        result["gemms"].append(dict(what=name, m=m, n=n, k=k, ms=ms, tflops=tflops))
        print(f"gemm {name:18s} {m:6d}x{n:6d}x{k:6d} {ms:9.4f} ms {tflops:7.1f} TFLOP/s", flush=True)

    # Copy bandwidth: 2 GiB device to device, read plus write.
    nbytes = 2 << 30
    src = torch.randint(0, 255, (nbytes,), device="cuda", dtype=torch.uint8)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), 3, repeat)
    result["copy_bytes_per_s"] = 2 * nbytes / (ms / 1e3)
    print(f"copy: {result['copy_bytes_per_s'] / 1e12:.2f} TB/s (read + write)", flush=True)
    del src, dst

    # Launch overhead: back-to-back launches of a one-element add, host clock.
    x = torch.randn(1, device="cuda")
    count = 2000
    for _ in range(200):
        x.add_(1.0)
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for _ in range(count):
        x.add_(1.0)
    torch.cuda.synchronize()
    result["launch_host_s"] = (time.perf_counter() - begin) / count
    # The same kernels replayed from a graph: the device's time per kernel.
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(count):
                x.add_(1.0)
    torch.cuda.synchronize()
    ms = median_ms(graph.replay, 2, repeat)
    result["launch_graph_s"] = ms / 1e3 / count
    print(f"launch: {result['launch_host_s'] * 1e6:.2f} us per launch from the host, "
          f"{result['launch_graph_s'] * 1e6:.2f} us per kernel in a graph", flush=True)
    result["seconds"] = time.time() - started
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
