"""Random JSON Lines for the tokenizer's comparison with its oracle: each
document a mix of what GPT-2's pattern treats apart (contractions in both
cases, runs of every kind of whitespace, CRLF, letters, digits and
punctuation of several scripts, emoji with joiners and modifiers, combining
marks, controls, supplementary planes) and of code points drawn from all of
Unicode. A fresh seed each run unless one is given; it is printed.

  random_text.py DOCUMENTS [SEED] > FILE.jsonl
"""
import json
import random
import sys

seed = int(sys.argv[2]) if len(sys.argv) > 2 else random.SystemRandom().randrange(2**32)
print("random_text.py seed %d" % seed, file=sys.stderr)
rng = random.Random(seed)
POOL = [" ", "  ", "   ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\ufeff", "\u0085", "\u2028",
        "'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'x",
        "a", "Z", "é", "ß", "я", "中", "ア", "한", "ع", "अ", "ก", "the", " the", "ing", "tion",
        "1", "42", "٣", "１", "²", "½", "Ⅻ", ",", ".", "!", "?", "-", "_", ",,", ",,,", "...",
        "😀", "👍🏽", "\u200d", "\u0301", "\x00", "\x01", "\x7f", "\u00ad",
        "𝔘", "𝟙", "\U0010fffd", "\ue000", "http://", "  \n", "{", "};"]


def any_code_point():
    while True:
        c = rng.randrange(0x110000)
        if not 0xD800 <= c <= 0xDFFF:
            return chr(c)


for _ in range(int(sys.argv[1])):
    text = "".join(any_code_point() if rng.random() < 0.08 else rng.choice(POOL)
                   for _ in range(rng.randrange(0, 60)))
    print(json.dumps({"text": text}, ensure_ascii=rng.random() < 0.5))
