"""Reads and writes F32 safetensors files, as strata-run writes them (no
safetensors package)."""
import json
import struct

import torch


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", entry
        begin, end = entry["data_offsets"]
        values = torch.frombuffer(bytearray(body[begin:end]), dtype=torch.float32)
        tensors[name] = values.reshape(entry["shape"]).clone()
    return tensors


def write(path, tensors):
    """tensors: name -> float32 tensor, written in name order."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
