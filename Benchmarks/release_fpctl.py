"""The fpctl a benchmark measures: the one given with --fpctl, else a release
build of this checkout (built first if it is stale). With static=True, the
build Scripts/install.sh installs: the Swift runtime and Foundation linked in
(--static-swift-stdlib, in .build-static)."""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def release_fpctl(given=None, static=False):
    if given:
        return given
    build = ["swift", "build", "-c", "release", "--product", "fpctl"]
    if static:
        build += ["--static-swift-stdlib", "--scratch-path", ".build-static"]
    subprocess.run(build, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return subprocess.run(build + ["--show-bin-path"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip() + "/fpctl"
