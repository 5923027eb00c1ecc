"""What a refused plan looks like: strata-run exits 1 with one error line on
stderr and nothing on stdout (not a crash, not a hang, not a run that fails
half way). Shared by corrupt_plans.py and craft_plans.py."""
import subprocess
import sys


def refused(name, path, flags=("--train-iters", "1"), timeout=120):
    """Runs strata-run on `path`; returns its error line, or exits the
    script saying how the plan was not refused cleanly."""
    result = subprocess.run(["strata-run", path, *flags],
                            capture_output=True, text=True, timeout=timeout)
    lines = result.stderr.strip().splitlines()
    if not (result.returncode == 1 and len(lines) == 1 and
            lines[0].startswith("strata-run: error: ") and not result.stdout):
        print(f"NOT REFUSED CLEANLY: {name}: exit {result.returncode}\n"
              f"{result.stdout}\n{result.stderr}")
        sys.exit(1)
    return lines[0]
