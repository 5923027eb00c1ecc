"""Feeds strata-run damaged copies of a good plan; each must be refused with
one clear error line and exit status 1 (not a crash, not a hang).

Cases: truncation at every 1/16 of the file, one flipped byte at each 1/16
(and in the header's magic, version and checksum), a plan of another format
version, and a file that is not a plan at all.
"""
import os
import struct
import sys
import tempfile

import refusal

plan_path = sys.argv[1]
with open(plan_path, "rb") as f:
    good = f.read()
work = tempfile.mkdtemp(prefix="strata-corrupt-")


def refused(name, data):
    path = os.path.join(work, name + ".plan")
    with open(path, "wb") as f:
        f.write(data)
    return refusal.refused(name, path, timeout=60)


messages = set()
for k in range(16):
    cut = len(good) * k // 16
    messages.add(refused(f"truncated-{k}", good[:cut]).split(": ", 3)[-1].split(" (")[0])
positions = [0, 9, 13] + [16 + (len(good) - 17) * k // 15 for k in range(16)]
for position in positions:
    data = bytearray(good)
    data[position] ^= 0x5A
    messages.add(refused(f"flipped-{position}", bytes(data)).split(": ", 3)[-1].split(" (")[0])
wrong_version = bytearray(good)
wrong_version[8:12] = struct.pack("<I", 99)
print(refused("version", bytes(wrong_version)))
print(refused("text", b"this is not a plan\n" * 10))
for message in sorted(messages):
    print("seen:", message)
print(f"refused {16 + len(positions)} damaged plans cleanly")
