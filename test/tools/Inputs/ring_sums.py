"""Reads a context-parallel plan's exec IR (strata-compile --emit exec) and
says in which element type the ring keeps each rank's running sums: the
output that attention_merge merges each step into, and the query gradient
that each later step's attention_bwd part is accumulated into; and which
type the sums are rounded into at the end (a copy to the attention's own
result).

  ring_sums.py EXEC_IR"""
import re
import sys

text = open(sys.argv[1]).read()
types = dict(re.findall(r"exec\.buffer @(\S+) : tensor<[0-9x]*x(\w+)>", text))
launches = re.findall(r'exec\.launch "(\w+)" \(([^)]*)\) -> \(([^)]*)\)', text)


def names(operands):
    return [n.strip().lstrip("@") for n in operands.split(",") if n.strip()]


merged = {names(outs)[0] for kernel, ins, outs in launches if kernel == "attention_merge"}
step_dq = {names(outs)[0] for kernel, ins, outs in launches if kernel == "attention_bwd"}
dq_sums = {names(outs)[0] for kernel, ins, outs in launches
           if kernel == "accumulate" and names(ins)[0] in step_dq}
if not merged or not dq_sums:
    sys.exit("no ring attention in the plan")
rounded = {names(outs)[0] for kernel, ins, outs in launches
           if kernel == "copy" and names(ins)[0] in merged | dq_sums}
for what, buffers in (("merged output", merged), ("query gradient", dq_sums),
                      ("results", rounded)):
    print(f"{what}: " + ", ".join(sorted({types[b] for b in buffers})) if buffers
          else f"{what}: none")
