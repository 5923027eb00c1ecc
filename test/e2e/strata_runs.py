"""What the checkpoint and interchange scripts share: running a tool, the
losses of a strata-run log, and the environment mpirun needs as root."""
import os
import re
import subprocess
import sys

LOSS = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*\| lm loss: ([0-9.E+-]+) \|")

MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")


def run(cmd, env=None):
    """The command's stdout; on failure the script fails, saying why."""
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{result.stdout}\n{result.stderr}")
    return result.stdout


def losses(log):
    """Iteration -> the lm loss strata-run logged for it, as printed."""
    return {int(m[1]): m[2] for m in LOSS.finditer(log)}
