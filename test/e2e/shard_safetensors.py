"""Splits a safetensors file into Hugging Face's sharded layout: N files
model-0000K-of-0000N.safetensors, tensors dealt out in name order, and
model.safetensors.index.json mapping each tensor to its file.

  shard_safetensors.py FILE DIR N [--misplace NAME]

--misplace NAME writes an index that puts tensor NAME in another file than
the one holding it."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("file")
p.add_argument("dir")
p.add_argument("n", type=int)
p.add_argument("--misplace")
args = p.parse_args()
tensors = safetensors_io.read(args.file)
os.makedirs(args.dir, exist_ok=True)
names = [f"model-{k + 1:05d}-of-{args.n:05d}.safetensors" for k in range(args.n)]
weight_map = {name: names[i % args.n] for i, name in enumerate(sorted(tensors))}
for shard in names:
    safetensors_io.write(os.path.join(args.dir, shard),
                         {t: v for t, v in tensors.items() if weight_map[t] == shard})
if args.misplace:
    weight_map[args.misplace] = names[(names.index(weight_map[args.misplace]) + 1) % args.n]
total = sum(v.numel() * 4 for v in tensors.values())
with open(os.path.join(args.dir, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
