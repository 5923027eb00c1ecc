"""Debian's fortunes (package fortunes-min) as JSON Lines, a document per
fortune, for tests of real text:

  fortunes_jsonl.py FILE... [--bytes] > OUT.jsonl

FILE names a fortune file (fortunes, literature, riddles). With --bytes each
document is its UTF-8 bytes as NullTokenizer ids ("72 101 ..."), for models
with a byte vocabulary."""
import json
import sys

names = [a for a in sys.argv[1:] if a != "--bytes"]
for name in names:
    with open("/usr/share/games/fortunes/" + name, encoding="utf-8") as f:
        for doc in f.read().split("\n%\n"):
            if not doc.strip():
                continue
            text = " ".join(str(b) for b in doc.encode("utf-8")) if "--bytes" in sys.argv else doc
            print(json.dumps({"text": text}))
