"""The fpctl a benchmark measures: the one given with --fpctl, else a release
build of this checkout (built first if it is stale)."""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def release_fpctl(given=None):
    if given:
        return given
    subprocess.run(["swift", "build", "-c", "release", "--product", "fpctl"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    return subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip() + "/fpctl"
