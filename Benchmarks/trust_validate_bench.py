#!/usr/bin/env python3
"""#53: what a trust root costs bundle validate.

The demo bundle signed twice from the same build: in the single-key form
(`validate --public-key`, the reference) and in the trust-root form under a
chain of three root versions (version 1 with root key r1; version 2 rotated to
r2, signed by r1 and r2; version 3 delegating the CI key, signed by r2), checked
with `validate --trust` against version 1, the copy an app embeds, so that
validation walks two root updates and checks the delegation. Both are timed in
interleaved rounds (each round runs every command --runs times, whole processes
as a pipeline runs them), and counted by callgrind (instructions of one run of
each, steady on a noisy VM). Prints each median, the ratio and the goal:
trust-root validate at most 1.2x the single-key one.

    Benchmarks/trust_validate_bench.py [--rounds 5] [--runs 20] [--fpctl PATH] [--keep]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from release_fpctl import release_fpctl  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.2


def run(cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def timed(cmd, runs):
    start = time.perf_counter()
    for _ in range(runs):
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            sys.exit(f"{' '.join(cmd)} exited {r.returncode}")
    return (time.perf_counter() - start) / runs


def instructions(cmd, work):
    """callgrind's instruction count of one run of `cmd`, as warm_callgrind.py
    counts them: a copy of the binary without DWARF, sigsuspend_copy.c preloaded."""
    shim = os.path.join(work, "sigsuspend_copy.so")
    if not os.path.exists(shim):
        run(["cc", "-shared", "-fPIC", "-O2", "-o", shim, str(ROOT / "Benchmarks/sigsuspend_copy.c")])
        run(["objcopy", "--strip-debug", cmd[0], os.path.join(work, "fpctl-plain")])
    out = os.path.join(work, "callgrind.out")
    env = {**os.environ, "SWIFT_BACKTRACE": "enable=no", "LD_PRELOAD": shim}
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", os.path.join(work, "fpctl-plain"),
                    *cmd[1:]], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    with open(out) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    sys.exit("callgrind wrote no summary")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--fpctl")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    fpctl = release_fpctl(args.fpctl)
    work = tempfile.mkdtemp(prefix="work-trust-", dir=ROOT / "Benchmarks")
    try:
        w = lambda name: os.path.join(work, name)  # noqa: E731
        run([fpctl, "bundle", "build", str(ROOT / "bundles/demo"), "-o", w("demo.fpbundle")])
        for key in ["r1", "r2", "ci"]:
            run([fpctl, "bundle", "keygen", "-o", w(key)])
        run([fpctl, "trust", "init", "-o", w("trust.json"), "--app-id", "demo", "--root-key", w("r1.key")])
        shutil.copy(w("trust.json"), w("app.json"))
        run([fpctl, "trust", "rotate", w("trust.json"), "--root-key", w("r1.key"), "--new-root-key", w("r2.key")])
        run([fpctl, "trust", "delegate", w("trust.json"), "--root-key", w("r2.key"), "--public-key", w("ci.pub")])
        run([fpctl, "bundle", "sign", w("demo.fpbundle"), "--key", w("ci.key"), "-o", w("single.fpbundle")])
        run([fpctl, "bundle", "sign", w("demo.fpbundle"), "--key", w("ci.key"), "--trust", w("trust.json"),
             "--sequence", "1", "-o", w("trust.fpbundle")])
        single = [fpctl, "bundle", "validate", w("single.fpbundle"), "--public-key", w("ci.pub")]
        trust = [fpctl, "bundle", "validate", w("trust.fpbundle"), "--trust", w("app.json")]
        check = subprocess.run(trust, capture_output=True, text=True)
        if check.returncode != 0 or "root version 3" not in check.stdout:
            sys.exit(f"the trust-root bundle does not validate through version 3: {check.stdout}{check.stderr}")
        timed(single, 3)
        timed(trust, 3)
        singles, trusts = [], []
        for i in range(args.rounds):
            order = [(single, singles), (trust, trusts)]
            if i % 2:
                order.reverse()
            for cmd, into in order:
                into.append(timed(cmd, args.runs))
        s, t = statistics.median(singles), statistics.median(trusts)
        print(f"fpctl {fpctl}; {args.rounds} interleaved rounds of {args.runs} runs each, medians")
        print(f"validate --public-key (single-key form)       {s * 1000:8.2f} ms")
        print(f"validate --trust (3 root versions, delegated) {t * 1000:8.2f} ms")
        print(f"ratio {t / s:.3f}x (goal <= {GOAL}x): {'met' if t / s <= GOAL else 'NOT met'}")
        if shutil.which("valgrind"):
            si, ti = instructions(single, work), instructions(trust, work)
            print(f"instructions (callgrind): single-key {si:,}, trust root {ti:,}, ratio {ti / si:.3f}x, "
                  f"the trust root's own {ti - si:,}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


main()
