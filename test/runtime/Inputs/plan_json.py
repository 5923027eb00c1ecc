"""A plan as JSON and back: the payload decoded with flatc against the
plan's schema, and a JSON plan encoded and framed again (the header's
magic and version kept, the checksum recomputed), so that a crafted plan
reaches the loader's value checks. Shared by craft_plans.py and the GPU
tests' craft_cuda_plans.py."""
import copy
import json
import os
import struct
import subprocess
import zlib


class PlanJson:
    def __init__(self, schema, work):
        self.schema, self.work = schema, work

    def decode(self, path):
        """(header, plan) of the plan file at `path`."""
        data = open(path, "rb").read()
        header, payload = data[:16], data[16:]
        binary = os.path.join(self.work, "plan.bin")
        open(binary, "wb").write(payload)
        subprocess.run(["flatc", "--json", "--strict-json", "--defaults-json",
                        "--raw-binary", "-o", self.work, self.schema, "--",
                        binary], check=True)
        return header, json.load(open(os.path.join(self.work, "plan.json")))

    def encode(self, header, plan, path):
        """Writes `plan` framed with `header` to `path`."""
        source = os.path.join(self.work, "crafted.json")
        json.dump(plan, open(source, "w"))
        subprocess.run(["flatc", "-b", "-o", self.work, self.schema, source],
                       check=True)
        payload = open(os.path.join(self.work, "crafted.bin"), "rb").read()
        frame = header[:12] + struct.pack("<I", zlib.crc32(payload) & 0xFFFFFFFF)
        open(path, "wb").write(frame + payload)

    def craft(self, name, source, mutate):
        """`source` (decode's pair) with `mutate` applied to a copy of its
        plan, written as NAME.plan in the work folder; its path."""
        header, plan = source
        crafted = copy.deepcopy(plan)
        mutate(crafted)
        path = os.path.join(self.work, name + ".plan")
        self.encode(header, crafted, path)
        return path
