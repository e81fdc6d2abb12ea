#!/usr/bin/env python3
"""Many writers on one cache directory, at scale (Scripts/soak.sh; docs/soak.md;
docs/cache-format.md, "Many writers").

WRITERS `fpctl cache put` processes share KEYS keys, each key written by two
writers. Phase 1, chaos: the writers run over and over while a random one is
killed (SIGKILL) every --kill-every seconds and started again, `cache prune
--older-than 1h` and `cache verify` run beside them, and every verify must be
clean (no false finding while files are replaced). Phase 2, the last word: every
writer runs once more, whole, all at once, writer i's lines resolved at
BASE + i seconds (BASE after every chaos entry) and carrying a flow whose version names it; then a prune. It
must hold that every key has an entry, that each key's entry is the one of the
later of its two writers (the later name wins, whatever order they finished
in), that verify is clean and that no key directory is left empty.

Prints one line of figures and exits 1 on any violation."""
import argparse
import csv
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "Tests" / "format2"))
import fpcache2  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fpctl", required=True)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--chaos-seconds", type=float, default=120)
    parser.add_argument("--kill-every", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="fpctl-soak-writers-"))
    cache = work / "cache"
    flow = json.loads((ROOT / "bundles/demo/flows/paywall.json").read_text())
    flow.pop("content_hash", None)
    span = args.keys // args.writers

    def keys_of(i):
        # Two writers per key: writer i covers its own span and half of each neighbour's.
        start = i * span - span // 2
        return [(start + k) % args.keys for k in range(2 * span)]

    def writer_input(i, resolved_at=None):
        path = work / f"flow-{i}.json"
        path.write_text(json.dumps(dict(flow, version=f"w{i}")))
        at = f',"resolved_at":"{resolved_at}"' if resolved_at else ""
        lines = (f'{{"placement":"paywall","user_id":"k{k}","flow_file":"{path}"{at}}}\n' for k in keys_of(i))
        out = work / f"in-{i}{'-final' if resolved_at else ''}.jsonl"
        out.write_text("".join(lines))
        return out

    def put(inp):
        return subprocess.Popen([args.fpctl, "cache", "put", "--cache-dir", str(cache), "--input", str(inp)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    inputs = [writer_input(i) for i in range(args.writers)]
    subprocess.run([args.fpctl, "cache", "put", "--cache-dir", str(cache), "--input", "/dev/null"], check=True,
                   capture_output=True)
    problems = []
    stats = {"kills": 0, "runs": 0, "prunes": 0, "verifies": 0}
    started = time.monotonic()
    stop = threading.Event()

    def beside(kind, argv):
        while not stop.is_set():
            r = subprocess.run([args.fpctl] + argv, capture_output=True, text=True)
            stats[kind] += 1
            if r.returncode != 0:
                problems.append(f"{kind}: exit {r.returncode}: {r.stdout[:300]} {r.stderr[:300]}")

    helpers = [threading.Thread(target=beside, args=("prunes", ["cache", "prune", "--cache-dir", str(cache), "--older-than", "1h"])),
               threading.Thread(target=beside, args=("verifies", ["cache", "verify", "--cache-dir", str(cache)]))]
    for h in helpers:
        h.start()
    running = {i: put(inputs[i]) for i in range(args.writers)}
    next_kill = time.monotonic() + args.kill_every
    while time.monotonic() - started < args.chaos_seconds:
        time.sleep(0.05)
        for i, p in list(running.items()):
            if p.poll() is not None:
                if p.returncode not in (0, -9):
                    problems.append(f"writer {i}: exit {p.returncode}: {p.stderr.read()[:300]}")
                stats["runs"] += 1
                running[i] = put(inputs[i])
        if time.monotonic() >= next_kill:
            victim = rng.randrange(args.writers)
            running[victim].kill()
            stats["kills"] += 1
            next_kill = time.monotonic() + args.kill_every
    for p in running.values():
        p.kill()
        p.wait()
    stop.set()
    for h in helpers:
        h.join()
    chaos = time.monotonic() - started

    # Phase 2: the last word, all writers at once, writer i's entries resolved at BASE + i.
    # After every chaos entry (resolved at its writer's now), within the 60 s clock skew allowed.
    base = int(time.time()) + 1
    finals = [put(writer_input(i, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base + i)))) for i in range(args.writers)]
    for i, p in enumerate(finals):
        p.wait()
        if p.returncode != 0:
            problems.append(f"final writer {i}: exit {p.returncode}: {p.stderr.read()[:300]}")
    prune = subprocess.run([args.fpctl, "cache", "prune", "--cache-dir", str(cache), "--older-than", "30d"], capture_output=True, text=True)
    if prune.returncode != 0:
        problems.append(f"final prune: exit {prune.returncode}: {prune.stderr[:300]}")
    listing = subprocess.run([args.fpctl, "cache", "list", "--cache-dir", str(cache), "--format", "csv"],
                             capture_output=True, text=True, check=True).stdout
    rows = list(csv.DictReader(io.StringIO(listing)))
    winner = {}
    for i in range(args.writers):
        for k in keys_of(i):
            winner[k] = max(winner.get(k, -1), i)
    seen = {}
    for row in rows:
        seen[int(row["user_id"][1:])] = row["version"]
    missing = [k for k in range(args.keys) if k not in seen]
    wrong = [k for k, v in seen.items() if v != f"w{winner[k]}"]
    if missing:
        problems.append(f"{len(missing)} keys without an entry, e.g. k{missing[0]}")
    if wrong:
        problems.append(f"{len(wrong)} keys whose entry is not the later writer's, e.g. k{wrong[0]}: {seen[wrong[0]]}")
    verify = subprocess.run([args.fpctl, "cache", "verify", "--cache-dir", str(cache)], capture_output=True, text=True)
    if verify.returncode != 0:
        problems.append(f"final verify: exit {verify.returncode}: {verify.stdout[:300]}")
    keydir = cache / "flows" / "paywall"
    # Format 1: no key directory left empty; format 2: every key's newest record whole, read by
    # the reader written from docs/cache-format.md (Tests/format2/fpcache2.py), not fpctl's code.
    empty = [d for d in os.listdir(keydir) if not os.listdir(keydir / d)] if keydir.is_dir() else []
    if empty:
        problems.append(f"{len(empty)} empty key directories after the prune")
    if (cache / "log").is_dir():
        records, log_problems = fpcache2.read(cache)
        entries, _ = fpcache2.newest(records)
        broken = [(k, p) for k, r in entries.items() if (p := fpcache2.check_entry(cache, r))]
        problems += [f"format 2: {p}" for p in log_problems] + [f"format 2: {k}: {p}" for k, p in broken[:5]]
    total = time.monotonic() - started
    print(f"many-writers: seed {args.seed}, {args.writers} writers, {args.keys} keys, chaos {chaos:.0f}s: "
          f"{stats['runs']} whole runs, {stats['kills']} kills, {stats['prunes']} prunes, {stats['verifies']} verifies beside; "
          f"final: {len(rows)} keys listed, {len(missing)} missing, {len(wrong)} not the later writer's, "
          f"{len(empty)} empty directories; {len(problems)} problems; {total:.0f}s")
    for p in problems[:20]:
        print("  " + p)
    subprocess.run(["rm", "-rf", str(work)])
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
