#!/usr/bin/env python3
"""Fault campaign: can a killed warm, a flaky backend and a concurrent prune damage a cache?

Usage: Tests/faults/fault_campaign.py [--fpctl PATH] [--identities N] [--kills K] [--seed S]

Against `fpctl serve bundles/demo` on loopback, whose faults change every second
(latency, 503, 429 with Retry-After, truncated and invalid bodies, connections
cut mid-body, or none), with `fpctl cache prune --max-size` running in a loop:

1. `fpctl warm` over N identities (default 10,000; two placements, every
   screen's images), each run starting at a random line of the list, is
   SIGKILLed at K random points (default 50) between 0.1 and 8 seconds in.
2. After every kill, with the prune loop paused: `fpctl cache verify` must be
   clean, `fpctl cache list` must show one entry per key directory, and every
   entry file is checked again here, in Python (not fpctl's code): the file
   parses, its metadata matches its name's, `flow_sha256` is the SHA-256 of the
   flow's canonical JSON, and the flow's `content_hash` holds. In a format-2
   cache, Tests/format2/fpcache2.py (written from docs/cache-format.md) reads
   every segment and checks each key's newest record and its flow the same way.
3. A last run with no faults and no kill must warm every (identity, placement)
   with its images, and the cache must then hold an entry for each.

The server sends a 1-second TTL, so every run resolves and writes again rather
than reading what the last one left. Prints the figures (kills, entries checked,
damage found) and exits 1 when anything was damaged or lost, leaving its work
directory (Tests/faults/work-faults-PID) to look at; a clean run removes it.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "Tests" / "format2"))
import fpcache2  # noqa: E402
PLACEMENTS = ["onboarding", "paywall"]

FAULTS = [
    {},
    {"latency_ms": [5, 120]},
    {"fail_rate": 0.3, "fail_status": 503},
    {"fail_rate": 0.3, "fail_status": 429, "retry_after": 1},
    {"truncate_body": True},
    {"invalid_json": True},
    {"close_connection": True},
    {"latency_ms": [0, 40], "fail_rate": 0.2, "fail_status": 500},
]


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def check_entry(path: Path) -> str | None:
    """An entry file as the SDK would read it (docs/cache-format.md); None when sound."""
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError) as e:
        return f"unreadable or not JSON: {e}"
    for field in ("placement", "fingerprint", "flow", "flow_sha256", "ttl_seconds", "resolved_at"):
        if field not in doc:
            return f"missing {field}"
    ttl = path.name.split("~")[2]
    if path.parent.name.split("~")[0] != doc["fingerprint"] or str(doc["ttl_seconds"]) != ttl:
        return "metadata differs from the file name"
    flow = doc["flow"]
    if hashlib.sha256(canonical(flow)).hexdigest() != doc["flow_sha256"]:
        return "flow_sha256 does not match the flow"
    body = {k: v for k, v in flow.items() if k != "content_hash"}
    if flow.get("content_hash") != "sha256:" + hashlib.sha256(canonical(body)).hexdigest():
        return "content_hash does not match the flow"
    return None


class Campaign:
    def __init__(self, args):
        self.fpctl = args.fpctl
        self.rng = random.Random(args.seed)
        # One directory per run: two campaigns at once must not share a cache.
        self.work = ROOT / "Tests" / "faults" / f"work-faults-{os.getpid()}"
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.cache = self.work / "cache"
        self.identities = self.work / "identities.jsonl"
        with self.identities.open("w") as f:
            for i in range(args.identities):
                f.write(json.dumps({"user_id": f"user-{i:05d}", "attributes": {"n": i % 7}}) + "\n")
        self.count = args.identities
        self.stop = threading.Event()
        self.prune_paused = threading.Event()
        self.prune_idle = threading.Event()
        self.fault_changes = 0
        self.prunes = 0

    def start_server(self):
        self.server = subprocess.Popen(
            [self.fpctl, "serve", str(ROOT / "bundles" / "demo"), "--port", "0", "--ttl", "1",
             "--rewrite-asset-urls", "-q"], stdout=subprocess.PIPE, text=True)
        self.url = self.server.stdout.readline().strip()
        if not self.url.startswith("http"):
            sys.exit("fault_campaign: fpctl serve did not start")

    def set_faults(self, faults):
        request = urllib.request.Request(self.url + "/_admin/faults", data=json.dumps(faults).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(request, timeout=5).read()

    def fault_loop(self):
        while not self.stop.wait(1.0):
            self.set_faults(self.rng.choice(FAULTS))
            self.fault_changes += 1

    def prune_loop(self):
        while not self.stop.is_set():
            if self.prune_paused.is_set():
                self.prune_idle.set()
                time.sleep(0.05)
                continue
            self.prune_idle.clear()
            subprocess.run([self.fpctl, "cache", "prune", "--cache-dir", str(self.cache), "--max-size", "40KiB"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.prunes += 1

    def rotated_identities(self) -> Path:
        """The identities from a random line on (then from the top), so successive runs
        write different entries and each kill lands somewhere else in the list."""
        lines = self.identities.read_text().splitlines(keepends=True)
        start = self.rng.randrange(len(lines))
        path = self.work / "identities-round.jsonl"
        path.write_text("".join(lines[start:] + lines[:start]))
        return path

    def warm(self, extra=(), identities=None, timeout="2s"):
        return [self.fpctl, "warm", *PLACEMENTS, "--cache-dir", str(self.cache), "--api-url", self.url,
                "--app-id", "demo", "--identities", str(identities or self.identities), "--media", "all-screens",
                "--concurrency", "16", "--timeout", timeout, "--retries", "1", "--grace", "1s", *extra]

    def pause_prune(self):
        self.prune_paused.set()
        self.prune_idle.wait()

    def check(self):
        """cache verify, then every entry file in Python: (entries checked, keys listed, damage)."""
        damage = []
        verify = subprocess.run([self.fpctl, "cache", "verify", "--cache-dir", str(self.cache), "--format", "json"],
                                capture_output=True, text=True)
        if verify.returncode != 0:
            # A killed format-2 writer can leave a torn last record: debris, as a dead writer's
            # temporary file is (readers stop before it; prune drops it). Anything else is damage.
            try:
                rules = {f.get("rule") for f in json.loads(verify.stdout).get("findings", [])}
            except ValueError:
                rules = {"unparsable"}
            if rules - {"cache-temp-debris"}:
                damage.append(f"cache verify exit {verify.returncode}: {verify.stdout.strip()[:400]}")
        listing = subprocess.run([self.fpctl, "cache", "list", "--cache-dir", str(self.cache), "--format", "json"],
                                 capture_output=True, text=True)
        if listing.returncode != 0:
            return 0, 0, damage + [f"cache list exit {listing.returncode}: {listing.stderr.strip()}"]
        listed = len(json.loads(listing.stdout)["rows"])
        checked = 0
        keys = 0
        if (self.cache / "log").is_dir():
            # Format 2: every key's newest record and its flow, read by the reader written from
            # docs/cache-format.md (Tests/format2/fpcache2.py), not fpctl's code.
            records, problems = fpcache2.read(self.cache)
            entries, _ = fpcache2.newest(records)
            damage += [f"format 2: {p}" for p in problems if "torn" not in p]
            for key, record in entries.items():
                checked += 1
                problem = fpcache2.check_entry(self.cache, record)
                if problem:
                    damage.append(f"{key}: {problem}")
            keys = len(entries)
        for key_dir in sorted((self.cache / "flows").glob("*/*")):
            files = sorted(p for p in key_dir.iterdir() if not p.name.startswith("."))
            keys += 1 if files else 0
            for entry in files:
                checked += 1
                problem = check_entry(entry)
                if problem:
                    damage.append(f"{entry}: {problem}")
        if listed != keys:
            damage.append(f"cache list shows {listed} entries, the directory holds {keys} keys")
        return checked, listed, damage

    def run(self, kills):
        self.start_server()
        threads = [threading.Thread(target=self.fault_loop, daemon=True),
                   threading.Thread(target=self.prune_loop, daemon=True)]
        for t in threads:
            t.start()
        figures = {"kills": 0, "finished_before_kill": 0, "entries_checked": 0, "damage": []}
        started = time.monotonic()
        try:
            for i in range(kills):
                self.prune_paused.clear()
                warm = subprocess.Popen(self.warm(["--format", "csv", "--fail-on", "never"],
                                                  self.rotated_identities()),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(self.rng.uniform(0.1, 8.0))
                if warm.poll() is None:
                    warm.send_signal(signal.SIGKILL)
                    figures["kills"] += 1
                else:
                    figures["finished_before_kill"] += 1
                warm.wait()
                self.pause_prune()
                checked, listed, damage = self.check()
                figures["entries_checked"] += checked
                figures["damage"] += damage
                print(f"round {i + 1}/{kills}: {listed} entries listed, {checked} files checked, "
                      f"{len(damage)} damaged", flush=True)
            # The last run: no faults, no kill, no prune.
            self.stop.set()
            for t in threads:
                t.join()
            self.set_faults({})
            # What it checks is that nothing was lost, not speed: a time limit
            # a busy machine cannot miss (2 s once cost 54 of 2,000 rows their images).
            final = subprocess.run(self.warm(["--format", "json"], timeout="30s"), capture_output=True, text=True)
            doc = json.loads(final.stdout) if final.stdout.strip() else {"rows": []}
            rows = doc["rows"]
            warmed = sum(1 for r in rows if r.get("state") == "warmed")
            media = sum(1 for r in rows if r.get("media_warmed"))
            figures["final"] = {"exit": final.returncode, "rows": len(rows), "warmed": warmed,
                                "media_warmed": media, "expected": self.count * len(PLACEMENTS)}
            checked, listed, damage = self.check()
            figures["entries_after_final"] = listed
            figures["entries_checked"] += checked
            figures["damage"] += damage
        finally:
            self.stop.set()
            self.server.terminate()
            self.server.wait()
        figures["seconds"] = round(time.monotonic() - started)
        figures["fault_changes"] = self.fault_changes
        figures["prunes"] = self.prunes
        return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fpctl", default=str(ROOT / ".build" / "release" / "fpctl"))
    parser.add_argument("--identities", type=int, default=10_000)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    campaign = Campaign(args)
    figures = campaign.run(args.kills)
    final = figures["final"]
    lost = final["expected"] - min(final["warmed"], final["media_warmed"], figures["entries_after_final"])
    print(json.dumps({k: v for k, v in figures.items() if k != "damage"}, indent=2))
    for line in figures["damage"][:20]:
        print("damage:", line)
    print(f"kills {figures['kills']}, entries checked {figures['entries_checked']}, "
          f"damage found {len(figures['damage'])}, lost {lost}")
    ok = not figures["damage"] and lost == 0 and final["exit"] == 0
    if ok:
        shutil.rmtree(campaign.work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
