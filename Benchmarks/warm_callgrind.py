#!/usr/bin/env python3
"""Benchmark: instructions per identity of `fpctl warm` (valgrind's callgrind),
for one or more fpctl binaries in the same run (issue #45).

Each binary warms `onboarding paywall --media none --concurrency 64` from a
`fpctl serve` of bundles/demo on loopback (the server runs natively and is
not counted) into a new cache on tmpfs, twice: with --identities (default
2,000) and with --base (default 200) identities. It prints the instructions
of the whole run (Ir), the run's Ir divided by its identities, and the
marginal cost, (Ir(N) - Ir(base)) / (N - base): what one more identity costs,
without the start-up both runs share. Instruction counts hold still on a
noisy VM where seconds do not: two runs of one binary differ by well under 1%.

valgrind needs two things from an fpctl binary: a copy without DWARF (3.19
cannot read some DWARF 5 forms; symbols stay, so --annotate names functions)
and Benchmarks/sigsuspend_copy.c preloaded (see there). Both are done here.

The references, in the same run: Benchmarks/HTTPFloor (AsyncHTTPClient alone,
configured as fpctl configures it, posting the same bodies with the same
concurrency and reading each answer whole; built here), counted the same way,
through each of its two APIs (#51): the async `execute` fpctl uses, and the
EventLoopFuture `execute(request:)`. Each binary's marginal cost is printed
beside both: what fpctl adds to the client it is built on.

Usage: Benchmarks/warm_callgrind.py [--fpctl LABEL=PATH ...] [--identities 2000]
                                    [--base 200] [--annotate N] [--no-floor] [--compare N]
                                    [--media none|first-screen|all-screens]
With --media other than none, the server rewrites the flows' image URLs to
itself (--rewrite-asset-urls), so each image is downloaded once a run and
every later identity finds it cached: the marginal cost is the image phase
of the engine, not the downloads.
Without --fpctl: a release build of this checkout. --annotate N prints the
N functions with the most instructions (self) of the last binary's run.
--compare N splits the last binary's marginal cost and the async floor's by
where it is spent (functions, demangled, grouped by module: the runtime's
retain/release, malloc, metadata, NIO, AsyncHTTPClient, fpctl's own), and
prints the N functions whose marginal cost differs most between the two:
where warm's instructions above its client go.
Needs: valgrind, cc, objcopy (binutils).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from fleet_sizing import serve
from release_fpctl import release_fpctl
from warm_wrk_bench import build_floor

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 64


def counted(command, out, shim, expect=None):
    """Runs `command` under callgrind: its instruction count (Ir). `expect`,
    when given, must appear in its standard error."""
    env = {**os.environ, "SWIFT_BACKTRACE": "enable=no", "LD_PRELOAD": str(shim)}
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *map(str, command)],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0 or (expect and expect not in done.stderr):
        sys.exit(f"{Path(str(command[0])).name} under callgrind failed ({done.returncode}): {done.stderr[-600:]}")
    summary = re.search(r"^summary: (\d+)", Path(out).read_text(errors="replace"), re.M)
    if not summary:
        sys.exit(f"no summary line in {out}")
    return int(summary.group(1))


def self_costs(out):
    """Instructions (self) by function of one callgrind output, names demangled."""
    report = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", str(out)],
                            capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in report.splitlines():
        match = re.match(r"^\s*([\d,]+) \([^)]*\)\s+(.*?)(?: \[(.*)\])?$", line)
        if match and ":" in match.group(2):
            name = match.group(2).split(":", 1)[1]
            costs[name] = costs.get(name, 0) + int(match.group(1).replace(",", ""))
    if shutil.which("swift"):
        names = list(costs)
        demangled = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(names),
                                   capture_output=True, text=True).stdout.splitlines()
        if len(demangled) == len(names):
            merged = {}
            for name, pretty in zip(names, demangled):
                merged[pretty] = merged.get(pretty, 0) + costs[name]
            costs = merged
    return costs


GROUPS = [
    ("retain/release", re.compile(r"swift_(retain|release|bridgeObjectRe|unknownObjectRe|nonatomic)|_swift_release_dealloc")),
    ("malloc/free", re.compile(r"^(malloc|free|_int_malloc|_int_free|cfree|realloc|calloc|malloc_consolidate|tcache|swift_slowAlloc|swift_slowDealloc|swift_allocObject|swift_deallocObject|unlink_chunk)")),
    ("metadata and generics", re.compile(r"[Mm]etadata|swift_getGeneric|swift_getWitnessTable|conformsToProtocol|swift_getAssociated|__swift_instantiate|\$s.*Ma$|type metadata")),
    ("locks, atomics, futex", re.compile(r"pthread_mutex|pthread_cond|futex|__lll_|os_unfair|swift_task_.*[Ll]ock")),
    ("memcpy/memmove/strlen", re.compile(r"^(__)?mem(cpy|move|set|cmp)|strlen|__memcpy|__memmove|__memset|__memcmp")),
    ("concurrency runtime", re.compile(r"swift_task|swift_job|swift::|Task|Executor|continuation", re.I)),
    ("NIO", re.compile(r"\bNIO|ByteBuffer|EventLoop|Channel", re.I)),
    ("AsyncHTTPClient", re.compile(r"HTTPClient|HTTP1|RequestBag|Transaction", re.I)),
    ("fpctl (FlowPilotCore, fpctl)", re.compile(r"FlowPilotCore|fpctl\.")),
]


def group_of(name):
    for label, pattern in GROUPS:
        if pattern.search(name):
            return label
    return "other (libc, Foundation, stdlib)"


def compare(work, n, args, top):
    """Prints binary n's marginal cost and the async floor's, split by group, and
    the functions whose marginal cost differs most."""
    span = args.identities - args.base

    def marginal(prefix):
        big, small = self_costs(work / f"{prefix}-{args.identities}.out"), self_costs(work / f"{prefix}-{args.base}.out")
        return {name: (big.get(name, 0) - small.get(name, 0)) / span for name in set(big) | set(small)}

    warm_costs, floor_costs = marginal(f"callgrind-{n}"), marginal("callgrind-floor-async")
    print("\nmarginal Ir per identity by group (self): warm, async floor, difference")
    groups = {}
    for costs, column in ((warm_costs, 0), (floor_costs, 1)):
        for name, value in costs.items():
            groups.setdefault(group_of(name), [0.0, 0.0])[column] += value
    for label, (w, f) in sorted(groups.items(), key=lambda item: -(item[1][0] - item[1][1])):
        print(f"  {label:34} {w:>10,.0f} {f:>10,.0f} {w - f:>+10,.0f}")
    print(f"\nthe {top} functions whose marginal Ir per identity differ most (warm - floor):")
    names = set(warm_costs) | set(floor_costs)
    ranked = sorted(names, key=lambda name: -abs(warm_costs.get(name, 0) - floor_costs.get(name, 0)))
    for name in ranked[:top]:
        w, f = warm_costs.get(name, 0), floor_costs.get(name, 0)
        print(f"  {w - f:>+9,.0f} ({w:>8,.0f} {f:>8,.0f})  {name[:140]}")


def warm(fpctl, url, identities, cache, media):
    return [fpctl, "warm", "onboarding", "paywall", "--api-url", url, "--app-id", "demo", "--identities", identities,
            "--cache-dir", cache, "--media", media, "--concurrency", CONCURRENCY, "--format", "csv",
            # Under callgrind warm runs 50 times slower: no identity may time out (a timeout is other work).
            "--timeout", "300s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpctl", action="append", default=[], help="LABEL=PATH, repeatable")
    ap.add_argument("--identities", type=int, default=2_000)
    ap.add_argument("--base", type=int, default=200)
    ap.add_argument("--annotate", type=int, default=0)
    ap.add_argument("--no-floor", action="store_true", help="skip the AsyncHTTPClient reference")
    ap.add_argument("--compare", type=int, default=0, help="split the marginal cost against the async floor's")
    ap.add_argument("--media", default="none", choices=["none", "first-screen", "all-screens"],
                    help="warm's --media (images served by the same server: --rewrite-asset-urls)")
    args = ap.parse_args()
    if args.base >= args.identities:
        sys.exit("--base must be fewer than --identities")
    binaries = [tuple(given.split("=", 1)) if "=" in given else (given, given) for given in args.fpctl]
    if not binaries:
        binaries = [("this checkout", release_fpctl(None))]
    work = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None, prefix="fpctl-callgrind-"))
    server = None
    try:
        shim = work / "sigsuspend_copy.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(ROOT / "Benchmarks/sigsuspend_copy.c")],
                       check=True)
        ids = {}
        for count in (args.base, args.identities):
            ids[count] = work / f"ids-{count}.jsonl"
            ids[count].write_text("".join(f'{{"user_id":"u{i}"}}\n' for i in range(count)))
        server, url = serve(binaries[0][1], 0, ["--rewrite-asset-urls"] if args.media != "none" else [])
        print(f"fpctl warm onboarding paywall --media {args.media} --concurrency {CONCURRENCY}, cache on tmpfs, "
              f"{args.identities} and {args.base} identities; instructions (callgrind Ir) of the fpctl process")
        floors = {}
        if not args.no_floor:
            plain = work / "http-floor"
            subprocess.run(["objcopy", "--strip-debug", build_floor(), str(plain)], check=True)
            for api in ("async", "future"):
                ir = {count: counted([plain, url, count, CONCURRENCY, api], work / f"callgrind-floor-{api}-{count}.out", shim)
                      for count in (args.base, args.identities)}
                floors[api] = (ir[args.identities] - ir[args.base]) / (args.identities - args.base)
                print(f"http-floor (AsyncHTTPClient alone, its {api} API): {ir[args.identities]:,} Ir for "
                      f"{args.identities}, {ir[args.base]:,} for {args.base}; marginal {floors[api]:,.0f} Ir per identity")
        out = None
        for n, (label, path) in enumerate(binaries):
            plain = work / f"fpctl-{n}"
            subprocess.run(["objcopy", "--strip-debug", path, str(plain)], check=True)
            ir = {}
            for count in (args.base, args.identities):
                out = work / f"callgrind-{n}-{count}.out"
                ir[count] = counted(warm(plain, url, ids[count], work / f"cache-{n}-{count}", args.media), out, shim,
                                    expect=f"warmed {2 * count},")
            marginal = (ir[args.identities] - ir[args.base]) / (args.identities - args.base)
            beside = (f" ({marginal / floors['async']:.2f}x the async floor's, the API fpctl uses; "
                      f"{marginal / floors['future']:.2f}x the EventLoopFuture floor's)") if floors else ""
            print(f"{label}: {ir[args.identities]:,} Ir for {args.identities} ({ir[args.identities] / args.identities:,.0f}"
                  f" per identity), {ir[args.base]:,} for {args.base}; marginal {marginal:,.0f} Ir per identity{beside}")
        if args.compare and out and floors:
            compare(work, len(binaries) - 1, args, args.compare)
        if args.annotate and out:
            report = subprocess.run(["callgrind_annotate", "--inclusive=no", str(out)], capture_output=True,
                                    text=True, check=True).stdout
            lines = [line for line in report.splitlines() if re.match(r"^\s*[\d,]+ \(", line)]
            print(f"\nthe last run's {args.annotate} functions with the most instructions (self):")
            print("\n".join(lines[1:args.annotate + 1]))
    finally:
        if server:
            server.terminate()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
