"""An independent reference for the samples Megatron's GPT datasets give
(megatron/core/datasets/gpt_dataset.py, blended_dataset.py, helpers.cpp and
blended_megatron_dataset_builder.py, as their documentation and code
describe them), written with numpy and the independent .bin/.idx reader,
nothing of strata's: prints samples as `strata-data samples` does.

  megatron_samples.py --data-path [W] PREFIX... --seq-length N
      --samples TRAIN[,VALID,TEST] [--split 969,30,1] [--seed 1234]
      [--which train] [--first 0] [--count 1]
"""
import argparse
import math
import os
import re
import sys

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import read_megatron_index  # noqa: E402


def split_bookends(text):
    parts = [float(x) for x in re.findall(r"[.0-9]+", text)]
    parts += [0.0] * (3 - len(parts))
    parts = [p / sum(parts) for p in parts]
    ends, low = [], 0
    for p in parts:
        ends.append(None if p == 0 else (low, low + p))
        low = low + p
    return ends


class GPTDataset:
    def __init__(self, index, begin, end, num_samples, seq, seed):
        self.index, self.seq = index, seq
        sizes = numpy.array(index[2], dtype=numpy.int64)
        docs = numpy.arange(begin, end, dtype=numpy.int32)
        per_epoch_tokens = int(numpy.sum(sizes[docs]))
        epochs = 1
        while epochs * per_epoch_tokens < num_samples * seq + 1:
            epochs += 1
        separate = False
        if epochs > 1:
            sans = ((epochs - 1) * per_epoch_tokens - 1) // seq
            per_epoch = (per_epoch_tokens - 1) // seq
            separate = num_samples - sans < int(0.80 * per_epoch)
        rs = numpy.random.RandomState(seed)

        def doc_index(n):
            d = numpy.mgrid[0:n, 0:len(docs)][1]
            d[:] = docs
            d = d.reshape(-1).astype(numpy.int32)
            rs.shuffle(d)
            return d

        if separate:
            self.doc_index = numpy.concatenate((doc_index(epochs - 1), doc_index(1)))
        else:
            self.doc_index = doc_index(epochs)
        count = (epochs * per_epoch_tokens - 1) // seq
        sample_index = [(0, 0)]
        di, off = 0, 0
        for _ in range(count):
            rem = seq + 1
            while rem != 0:
                length = sizes[self.doc_index[di]] - off
                rem -= length
                if rem <= 0:
                    off += rem + length - 1
                    rem = 0
                else:
                    di, off = di + 1, 0
            sample_index.append((di, int(off)))
        self.sample_index = sample_index
        first = numpy.arange(0, sans if separate else count, dtype=numpy.uint32)
        rs.shuffle(first)
        if separate:
            last = numpy.arange(sans, count, dtype=numpy.uint32)
            rs.shuffle(last)
            first = numpy.concatenate((first, last))
        self.shuffle = first

    def __len__(self):
        return len(self.sample_index) - 1

    def __getitem__(self, i):
        i = self.shuffle[i]
        (db, ob), (de, oe) = self.sample_index[i], self.sample_index[i + 1]
        out = []
        for k in range(db, de + 1):
            tokens = read_megatron_index.sequence(self.index, int(self.doc_index[k]))
            start = ob if k == db else 0
            stop = oe + 1 if k == de else len(tokens)
            out += tokens[start:stop]
        assert len(out) == self.seq + 1
        return out


class Blended:
    def __init__(self, datasets, weights, size):
        weights = numpy.array(weights, dtype=numpy.float64)
        weights = weights / numpy.sum(weights)
        taken = [0] * len(datasets)
        self.datasets, self.pick = datasets, []
        for s in range(size):
            x = max(float(s), 1.0)
            errors = [w * x - t for w, t in zip(weights, taken)]
            best = max(range(len(errors)), key=lambda d: (errors[d], -d))
            self.pick.append((best, taken[best]))
            taken[best] += 1

    def __getitem__(self, i):
        d, j = self.pick[i]
        return self.datasets[d][j]


def dataset(words, split, seq, seed, wanted, which="train"):
    """The train, valid or test dataset of --data-path `words` with
    `wanted` samples."""
    k = ["train", "valid", "test"].index(which)
    if len(words) == 1:
        prefixes, weights = words, None
    else:
        weights = [float(w) for w in words[0::2]]
        prefixes = words[1::2]
        weights = list(numpy.array(weights) / numpy.sum(numpy.array(weights)))
    low, high = split_bookends(split)[k]
    parts, size = [], 0
    for d, prefix in enumerate(prefixes):
        index = read_megatron_index.read(prefix)
        n = float(len(index[2]))
        begin, end = int(round(low * n)), int(round(high * n))
        asked = wanted
        if weights is not None:
            share = int(math.ceil(wanted * weights[d]))
            size += share
            asked = int(math.ceil(share * (1 + 0.005)))
        parts.append(GPTDataset(index, begin, end, asked, seq, seed))
    return parts[0] if weights is None else Blended(parts, weights, size)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-path", nargs="+", required=True)
    p.add_argument("--seq-length", type=int, required=True)
    p.add_argument("--samples", required=True)
    p.add_argument("--split", default="969,30,1")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--which", default="train")
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--count", type=int, default=1)
    a = p.parse_args()
    k = ["train", "valid", "test"].index(a.which)
    wanted = ([int(x) for x in a.samples.split(",")] + [0, 0])[k]
    data = dataset(a.data_path, a.split, a.seq_length, a.seed, wanted, a.which)
    for i in range(a.first, a.first + a.count):
        print("sample %d: %s" % (i, " ".join(map(str, data[i]))))


if __name__ == "__main__":
    main()
