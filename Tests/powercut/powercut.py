#!/usr/bin/python3
"""Power cuts during `fpctl warm`, `fpctl cache put` and `fpctl bundle build`.

Each run works on a LazyFS mount (lazyfs.py: an in-memory FUSE file system
that forgets what was never synced). The command is killed with SIGKILL at a
random moment of its run (or after it ended), the file system is unmounted,
the power cut drops every unsynced byte and name, and it is mounted again.
For warm and put, every other cut is timed by syncs instead: the command is
killed inside its Nth sync (N drawn from the syncs an uncut run makes), so the
cut falls inside a group commit (some of a group's files synced, the rest
not) or between a group's writes and its commit; there the strictest check
applies too: every row warm printed names an entry that was durable at the
moment of the kill, before any write-back luck.
Then, from what the command had printed before the cut (kept on the real
disk, as a scheduler's log would be):

  warm:  every row it printed as warmed from the network names an entry that
         `cache list` shows; `cache verify` finds nothing but the temporary
         files of the killed writer;
  put:   if it said "wrote N entries", all N are listed; verify as above;
  build: if it printed the bundle's digest, the file validates and
         `bundle validate` gives that digest; if not, the name is absent or holds a
         bundle that validates (never a torn one).

Prints one line per command (cuts, outputs and entries checked, lost or
damaged) and exits 1 if any reported output or entry was lost or damaged.
Run as root (FUSE); needs python3-fusepy (Scripts/install-deps.sh powercut).

Usage: Tests/powercut/powercut.py --fpctl .build/debug/fpctl [--cuts 10] [--seed N] [--format 1|2] [--skip-build]

In a format-2 cache (--format 2) a row printed must name an entry whose record
is in the durable bytes of a segment, read with Tests/format2/fpcache2.py
(written from docs/cache-format.md), and whose flow's object was durable.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "format2"))
import fpcache2  # noqa: E402
from lazyfs import LazyFS, mount  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ALLOWED_AFTER_KILL = {"cache-temp-debris"}


class Mount:
    def __init__(self, path: Path):
        self.path = path
        self.fs = LazyFS()
        self.thread = None

    def up(self):
        self.thread = mount(self.fs, str(self.path))
        deadline = time.time() + 10
        while not os.path.ismount(self.path):
            if time.time() > deadline or not self.thread.is_alive():
                sys.exit("powercut: the FUSE file system did not mount (is /dev/fuse there, and are we root?)")
            time.sleep(0.02)

    def down(self):
        for _ in range(100):
            if subprocess.run(["umount", str(self.path)], capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        else:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        self.thread.join(10)

    def cut(self, rng):
        self.down()
        self.fs.power_cut(rng)
        self.up()


def run_cut(cmd, stdout_path: Path, stderr_path: Path, after: float):
    """Starts cmd, kills it after `after` seconds (if still running); True if it was killed (here or by LazyFS)."""
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            proc.wait(after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        return proc.returncode == -signal.SIGKILL


def fpctl_json(fpctl, *args):
    done = subprocess.run([fpctl, *args, "--format", "json"], capture_output=True, text=True)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}


def verify_findings(fpctl, cache: Path):
    """The rules `cache verify` reports, other than the killed writer's temporary files."""
    if not (cache / "fpcache.json").exists():
        return []
    _, doc = fpctl_json(fpctl, "cache", "verify", "--cache-dir", str(cache))
    return [f"{f.get('rule')}: {f.get('path')}" for f in doc.get("findings", [])
            if f.get("rule") not in ALLOWED_AFTER_KILL]


def listed(fpctl, cache: Path):
    if not (cache / "fpcache.json").exists():
        return set()
    _, doc = fpctl_json(fpctl, "cache", "list", "--cache-dir", str(cache))
    return {(r["placement"], r["fingerprint"]) for r in doc.get("rows", [])}


def warm_rows(path: Path):
    """The whole rows of a (possibly cut short) warm JSON output."""
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        line = line.rstrip(",")
        if line.startswith("{") and line.endswith("}"):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "placement" in row:
                rows.append(row)
    return rows


def check_build(fpctl, printed_path: Path, output: Path, trial):
    """After a cut during `bundle build -o output`: the digest it printed (None if
    none), and what is wrong: a reported bundle gone or changed, or a file
    under the name that does not validate."""
    printed = printed_path.read_text(errors="replace").split()
    digest = printed[0] if printed and len(printed[0]) == 64 else None
    problems = []
    if output.exists():
        code, doc = fpctl_json(fpctl, "bundle", "validate", str(output))
        actual = (doc.get("files") or [{}])[0].get("digest")
        if code != 0:
            problems.append(f"build {trial}: {output.name} is there but does not validate"
                            + (" (it was reported)" if digest else ""))
        elif digest and actual != digest:
            problems.append(f"build {trial}: {output.name} has digest {actual[:12]}, reported {digest[:12]}")
    elif digest:
        problems.append(f"build {trial}: reported {output.name} is gone")
    return digest, problems


class Campaign:
    def __init__(self, args, work: Path, mnt: Mount):
        self.fpctl, self.args, self.work, self.mnt = args.fpctl, args, work, mnt
        self.rng = random.Random(args.seed)
        self.results = {}

    def tally(self, name, cuts=0, checked=0, lost=0, problems=()):
        r = self.results.setdefault(name, {"cuts": 0, "killed": 0, "by_sync": 0, "after_writes": 0, "checked": 0,
                                           "lost": 0, "problems": []})
        r["cuts"] += cuts
        r["checked"] += checked
        r["lost"] += lost
        r["problems"].extend(problems)
        return r

    def timed(self, cmd):
        """An uncut run: its wall time and the number of syncs it made."""
        start, syncs = time.perf_counter(), self.mnt.fs.syncs
        done = subprocess.run(cmd, capture_output=True)
        if done.returncode != 0:
            sys.exit(f"powercut: {' '.join(map(str, cmd))} failed uncut: {done.stderr.decode()[-400:]}")
        return time.perf_counter() - start, self.mnt.fs.syncs - syncs

    def cut_during(self, name, cmd, uncut, by_sync=False):
        """Runs cmd, cuts the power at a random moment (or inside a random sync);
        returns (stdout, stderr) paths and the files durable at a sync-timed kill."""
        out, err = self.work / f"{name}.out", self.work / f"{name}.err"
        duration, syncs = uncut
        durable = None
        if by_sync:
            nth = self.rng.randint(1, max(1, syncs))
            self.mnt.fs.arm_kill(nth)
            killed = run_cut(cmd, out, err, 120)
            self.mnt.fs.kill_at = None
            durable = self.mnt.fs.killed_durable
            where = ("after writes" if self.mnt.fs.killed_after_writes else "inside a commit") if durable is not None else "none (the run ended first)"
            moment = f"inside sync {nth} of {syncs} ({where})"
            r = self.tally(name)
            r["by_sync"] += 1
            r["after_writes"] += durable is not None and self.mnt.fs.killed_after_writes
        else:
            # warm reports as it goes; put and build only at the end, so half of their cuts come after it.
            after = self.rng.uniform(0, duration * (1.1 if name == "warm" else 2.0))
            killed = run_cut(cmd, out, err, after)
            moment = f"after {after:.3f}s of {duration:.3f}s"
        if self.args.verbose:
            print(f"{name}: cut {moment}, {'killed' if killed else 'done'}; "
                  f"stderr: {err.read_text(errors='replace')[-200:].strip()}", file=sys.stderr)
        self.mnt.cut(self.rng)
        r = self.tally(name, cuts=1)
        r["killed"] += killed
        return out, err, durable

    def warm(self, url, trial):
        ids = self.work / "ids.jsonl"
        ids.write_text("".join(json.dumps({"user_id": f"u{trial}-{i}"}) + "\n" for i in range(self.args.identities)))
        cache = self.mnt.path / f"warm-{trial}"

        def cmd(cache):
            return [self.fpctl, "warm", "onboarding", "paywall", "--api-url", url, "--app-id", "demo",
                    "--identities", str(ids), "--cache-dir", str(cache), "--format", "json", "--concurrency", "16"]
        if trial == 0:
            self.warm_uncut = self.timed(cmd(self.mnt.path / "warm-uncut"))
        out, _, durable = self.cut_during("warm", cmd(cache), self.warm_uncut, by_sync=trial % 2 == 1)
        reported = {(r["placement"], r["fingerprint"]) for r in warm_rows(out)
                    if r.get("state") == "warmed" and r.get("delivery_source") == "network"}
        present = listed(self.fpctl, cache)
        problems = [f"warm {trial}: reported entry {p}/{f[:8]} lost" for p, f in sorted(reported - present)]
        if durable is not None:
            # Format 1: /warm-N/flows/PLACEMENT/FINGERPRINT~USER/FILE, durable when the writer was killed.
            at_kill = {(parts[3], parts[4].split("~")[0]) for parts in (path.split("/") for path in durable)
                       if len(parts) == 6 and parts[1] == cache.name and parts[2] == "flows"}
            # Format 2: the entries in the segments' durable bytes whose flow was durable too, read by
            # the reader written from docs/cache-format.md.
            contents = self.mnt.fs.killed_contents
            objects = {p.rsplit("/", 1)[1] for p in contents if p.startswith(f"/{cache.name}/objects/")}
            for path, data in contents.items():
                if path.startswith(f"/{cache.name}/log/") and path.endswith(".seg"):
                    records, _ = fpcache2.records_in(data)
                    at_kill |= {(r["placement"], r["fingerprint"]) for r in records
                                if r["kind"] == "entry" and r["flow_sha256"] in objects}
            problems += [f"warm {trial}: row printed for {p}/{f[:8]}, not durable when the writer was killed"
                         for p, f in sorted(reported - at_kill)]
        problems += [f"warm {trial}: {f}" for f in verify_findings(self.fpctl, cache)]
        self.tally("warm", checked=len(reported), lost=len(reported - present), problems=problems)

    def put(self, trial):
        flow = ROOT / "bundles/demo/flows/paywall.json"
        n = self.args.identities
        lines = self.work / "put.jsonl"
        lines.write_text("".join(json.dumps({"placement": "paywall", "user_id": f"p{trial}-{i}", "attributes": {},
                                             "ttl_seconds": 300, "flow_file": str(flow)}) + "\n" for i in range(n)))
        cache = self.mnt.path / f"put-{trial}"
        cmd = [self.fpctl, "cache", "put", "--cache-dir", str(cache), "--input", str(lines)]
        if trial == 0:
            self.put_uncut = self.timed([self.fpctl, "cache", "put", "--cache-dir", str(self.mnt.path / "put-uncut"),
                                         "--input", str(lines)])
        _, err, _ = self.cut_during("put", cmd, self.put_uncut, by_sync=trial % 2 == 1)
        reported = f"wrote {n} entries" in err.read_text(errors="replace")
        present = listed(self.fpctl, cache)
        lost = n - len(present) if reported else 0
        problems = [f"put {trial}: said it wrote {n}, {len(present)} listed"] if lost else []
        problems += [f"put {trial}: {f}" for f in verify_findings(self.fpctl, cache)]
        self.tally("put", checked=n if reported else 0, lost=lost, problems=problems)

    def build(self, trial):
        source = ROOT / "bundles" / ("travel" if trial % 2 else "demo")
        outdir = self.mnt.path / f"build-{trial}"
        outdir.mkdir()
        self.mnt.fs.make_durable(f"/build-{trial}")
        output = outdir / "out.fpbundle"
        cmd = [self.fpctl, "bundle", "build", str(source), "-o", str(output)]
        if trial == 0:
            self.build_uncut = self.timed([self.fpctl, "bundle", "build", str(source), "-o",
                                           str(self.mnt.path / "uncut.fpbundle")])
        out, _, _ = self.cut_during("build", cmd, self.build_uncut)
        digest, problems = check_build(self.fpctl, out, output, trial)
        self.tally("build", checked=1 if digest else 0, lost=1 if digest and problems else 0, problems=problems)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpctl", required=True)
    ap.add_argument("--cuts", type=int, default=10, help="power cuts per command")
    ap.add_argument("--identities", type=int, default=40)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--verbose", action="store_true", help="a line per cut on standard error")
    ap.add_argument("--format", choices=["1", "2"], help="the cache format warm and put make (FPCTL_CACHE_FORMAT)")
    ap.add_argument("--skip-build", action="store_true", help="warm and put only (bundle build has no cache)")
    args = ap.parse_args()
    args.fpctl = str(Path(args.fpctl).resolve())
    if args.format:
        os.environ["FPCTL_CACHE_FORMAT"] = args.format
    if os.geteuid() != 0:
        sys.exit("powercut: needs root (FUSE mounts)")
    work = Path(tempfile.mkdtemp(prefix="fpctl-powercut-"))
    mnt = Mount(work / "mnt")
    mnt.path.mkdir()
    serve = subprocess.Popen([args.fpctl, "serve", str(ROOT / "bundles/demo"), "--port", "0", "-q",
                              "--rewrite-asset-urls"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = serve.stdout.readline().strip()
        if not url.startswith("http://"):
            sys.exit("powercut: fpctl serve did not start")
        mnt.up()
        campaign = Campaign(args, work, mnt)
        for trial in range(args.cuts):
            campaign.warm(url, trial)
            campaign.put(trial)
            if not args.skip_build:
                campaign.build(trial)
        failed = False
        print(f"power cuts (seed {args.seed}, LazyFS: unsynced bytes torn or dropped, unsynced names dropped "
              f"or kept by chance):")
        for name, r in campaign.results.items():
            what = {"warm": "reported entries", "put": "reported entries", "build": "reported bundles"}[name]
            timed = (f", {r['by_sync']} timed by syncs: {r['by_sync'] - r['after_writes']} inside a commit, "
                     f"{r['after_writes']} between writes and a commit") if r["by_sync"] else ""
            print(f"  {name:5} {r['cuts']:4} cuts ({r['killed']} mid-run{timed}), {r['checked']:5} {what} checked, "
                  f"{r['lost']} lost or damaged, {len(r['problems'])} problems")
            for p in r["problems"][:20]:
                print(f"    {p}")
            failed |= bool(r["problems"])
        sys.exit(1 if failed else 0)
    finally:
        serve.kill()
        if mnt.thread is not None and os.path.ismount(mnt.path):
            mnt.down()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
