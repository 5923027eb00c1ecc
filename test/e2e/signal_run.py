"""A training run stopped by a signal, as a scheduler stops one:
  signal_run.py SIGNAL AFTER_ITERATION [--mpi N] -- strata-run PLAN FLAGS...
Starts the run (under mpirun with N processes if --mpi), waits until it
has logged AFTER_ITERATION, sends SIGNAL to every strata-run process of it
(as Slurm signals every task), waits for it to end and prints its exit
status and the lines that say how it stopped.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

args = sys.argv[1:]
which, after = getattr(signal, args[0]), int(args[1])
args = args[2:]
mpi = 0
if args[0] == "--mpi":
    mpi, args = int(args[1]), args[2:]
assert args[0] == "--"
command = args[1:]
env = dict(os.environ)
if mpi:
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    command = ["mpirun", "-np", str(mpi)] + command
log = tempfile.TemporaryFile(mode="w+")
run = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                       start_new_session=True)  # its processes, found by session


def strata_runs():
    """The strata-run processes of this run: the run itself, or mpirun's
    children's."""
    if not mpi:
        return [run.pid]
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            if name == "strata-run" and os.getsid(int(pid)) == os.getsid(run.pid):
                found.append(int(pid))
        except (OSError, ValueError):
            pass
    return found


deadline = time.time() + 120
while time.time() < deadline and run.poll() is None:
    log.seek(0)
    if f" iteration {after:8d}/" in log.read():
        break
    time.sleep(0.02)
else:
    sys.exit(f"the run ended or stalled before iteration {after}")
pids = strata_runs()
for pid in pids:
    os.kill(pid, which)
status = run.wait(timeout=120)
log.seek(0)
text = log.read()
print(f"signalled {len(pids)} process(es) after iteration {after}; exit status {status}")
for line in text.splitlines():
    if "exiting program" in line or "error" in line or "saved checkpoint" in line:
        print(line)
