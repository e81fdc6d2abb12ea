#!/usr/bin/python3
"""Power cuts under ext4: the `syncfs` commit, which LazyFS cannot model.

fpctl commits a group with `syncfs(2)` where the file system honours it (ext4,
XFS, ...; docs/cache-format.md, "Group commit"); a FUSE file system such as
LazyFS never sees that call, so powercut.py tests the fsync path only. Here the
file system is the real ext4, on a loop device whose backing file is served by
VolatileDisk: a disk with a volatile write cache. Writes land in the cache; a
flush (which is what the loop device makes of ext4's journal commits and of
every syncfs) makes them durable; a power cut keeps what was flushed plus, with
write-back luck, a random subset of the 4 KiB blocks written since (a disk may
have written any of them back on its own, in any order). ext4's journal then
replays on the next mount, as after a real cut.

Each cut: `fpctl warm` or `fpctl cache put` runs into a new cache directory on
the ext4 (`fpctl bundle build` into a new output directory) and is killed with SIGKILL, either at a random moment (the cut follows
its death, with write-back luck) or inside the Nth flush the disk sees, N drawn
from the flushes an uncut run causes (the cut happens in that flush, before it
takes effect, and keeps nothing more: the strictest case, a cut inside one of
fpctl's own syncfs calls or between a group's writes and its commit). Then the
ext4 is unmounted, the loop device detached, the power cut, and everything
mounted again; from what the command printed before its death:

  warm: every row it printed as warmed from the network names an entry that
        `cache list` shows, and `cache verify` finds nothing but the killed
        writer's temporary files;
  put:  if it said "wrote N entries", all N are listed; verify as above;
  build: if it printed the bundle's digest, the file validates with that
        digest; if not, the name is absent or holds a bundle that validates.

At the end e2fsck must find the file system clean. Prints one line per command
(cuts, entries checked, lost or damaged) and exits 1 if anything reported was
lost or damaged. Run as root (FUSE, losetup, mount); needs python3-fusepy.

Usage: Tests/powercut/blockcut.py --fpctl .build/debug/fpctl [--cuts 6] [--identities 200] [--seed N]
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
import threading
import time
from pathlib import Path

import fusepy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diskfile import NAME, DiskFile  # noqa: E402
from powercut import check_build, listed, verify_findings, warm_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BLOCK = 4096


class VolatileDisk(DiskFile):
    """One file, `disk.img`, in memory: writes are cached until a flush (fsync)."""

    def __init__(self, size: int):
        self.size = size
        self.current = bytearray(size)   # what reads see: the cache over the medium
        self.durable = bytearray(size)   # the medium: what a power cut keeps
        self.dirty: set[int] = set()     # blocks written since the last flush
        self.mutex = threading.Lock()    # (not `lock`: that name is a FUSE operation)
        self.flushes = 0
        self.off = False                 # the power is cut: writes and flushes are lost
        self.kill_at: int | None = None  # the flush (counted from arm) to cut the power in
        self.kill_pid = 0
        self.since_arm = 0
        self.cut_in_flush = False

    # The power
    def arm(self, nth_flush: int, pid: int) -> None:
        with self.mutex:
            self.kill_at, self.kill_pid, self.since_arm, self.cut_in_flush = nth_flush, pid, 0, False

    def disarm(self) -> None:
        with self.mutex:
            self.kill_at = None

    def cut(self, rng: random.Random, p_writeback: float) -> None:
        with self.mutex:
            self._cut(rng, p_writeback)

    def _cut(self, rng: random.Random, p_writeback: float) -> None:
        if self.off:
            return
        for block in self.dirty:
            if rng.random() < p_writeback:
                start = block * BLOCK
                self.durable[start:start + BLOCK] = self.current[start:start + BLOCK]
        self.dirty.clear()
        self.off = True

    def power_on(self) -> None:
        with self.mutex:
            self.current = bytearray(self.durable)
            self.dirty.clear()
            self.off = False

    # FUSE operations (the rest are DiskFile's)
    def read(self, path, size, offset, fh):
        with self.mutex:
            return bytes(self.current[offset:offset + size])

    def write(self, path, data, offset, fh):
        with self.mutex:
            if not self.off:
                end = min(offset + len(data), self.size)
                self.current[offset:end] = data[:end - offset]
                self.dirty.update(range(offset // BLOCK, (end - 1) // BLOCK + 1))
            return len(data)

    def fsync(self, path, datasync, fh):
        with self.mutex:
            if self.off:
                return 0
            if self.kill_at is not None:
                self.since_arm += 1
                if self.since_arm >= self.kill_at:
                    # The power goes inside this flush, before it takes effect; the
                    # writer dies before its sync can return to it.
                    self.kill_at, self.cut_in_flush = None, True
                    self._cut(random.Random(0), 0.0)
                    os.kill(self.kill_pid, signal.SIGKILL)
                    return 0
            for block in self.dirty:
                start = block * BLOCK
                self.durable[start:start + BLOCK] = self.current[start:start + BLOCK]
            self.dirty.clear()
            self.flushes += 1
            return 0


class Machine:
    """The disk, its FUSE mount, the loop device and the ext4 on it."""

    def __init__(self, work: Path, size_mb: int):
        self.disk = VolatileDisk(size_mb << 20)
        self.fuse_dir, self.mnt = work / "fuse", work / "mnt"
        self.fuse_dir.mkdir()
        self.mnt.mkdir()
        self.thread = None
        self.loop = None

    def _fuse_up(self):
        self.thread = threading.Thread(target=lambda: fusepy.FUSE(
            self.disk, str(self.fuse_dir), foreground=True, nothreads=False), daemon=True)
        self.thread.start()
        deadline = time.time() + 10
        while not os.path.ismount(self.fuse_dir):
            if time.time() > deadline or not self.thread.is_alive():
                sys.exit("blockcut: the FUSE file system did not mount (is /dev/fuse there, and are we root?)")
            time.sleep(0.02)
        self.loop = subprocess.run(["losetup", "--find", "--show", str(self.fuse_dir / NAME)],
                                   check=True, capture_output=True, text=True).stdout.strip()

    def boot(self, fresh=False):
        """Powers on and mounts the ext4 (its journal replays after a cut)."""
        self.disk.power_on()
        self._fuse_up()
        if fresh:
            # 4 KiB blocks (the disk's unit of write-back luck) and inodes for every run's entries.
            subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-N", "65536", self.loop], check=True)
        subprocess.run(["mount", "-t", "ext4", self.loop, str(self.mnt)], check=True)

    def halt(self):
        """Unmounts everything; after a cut nothing of this reaches the medium."""
        for args in (["umount", str(self.mnt)], ["losetup", "-d", self.loop], ["umount", str(self.fuse_dir)]):
            for _ in range(100):
                if subprocess.run(args, capture_output=True).returncode == 0:
                    break
                time.sleep(0.05)
            else:
                sys.exit(f"blockcut: {' '.join(args)} failed")
        self.thread.join(10)
        self.loop = None

    def teardown(self):
        """Whatever is still mounted or attached, gone (best effort: the harness is ending)."""
        if os.path.ismount(self.mnt):
            subprocess.run(["umount", "-l", str(self.mnt)], capture_output=True)
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], capture_output=True)
        if os.path.ismount(self.fuse_dir):
            subprocess.run(["umount", "-l", str(self.fuse_dir)], capture_output=True)
        if self.thread is not None:
            self.thread.join(10)

    def fsck(self) -> str | None:
        """e2fsck's complaint about the unmounted file system, None when clean."""
        self.disk.power_on()
        self._fuse_up()
        done = subprocess.run(["e2fsck", "-fn", self.loop], capture_output=True, text=True)
        subprocess.run(["losetup", "-d", self.loop], capture_output=True)
        self.loop = None
        subprocess.run(["umount", str(self.fuse_dir)], capture_output=True)
        self.thread.join(10)
        return None if done.returncode == 0 else (done.stdout + done.stderr).strip()[-600:]


class Campaign:
    def __init__(self, args, work: Path, machine: Machine, url: str):
        self.args, self.work, self.m, self.url = args, work, machine, url
        self.fpctl = args.fpctl
        self.rng = random.Random(args.seed)
        self.results = {}
        self.uncut = {}

    def tally(self, name):
        return self.results.setdefault(name, {"cuts": 0, "killed": 0, "in_flush": 0, "checked": 0, "lost": 0,
                                              "problems": []})

    def warm_cmd(self, cache: Path, ids: Path):
        return [self.fpctl, "warm", "onboarding", "paywall", "--api-url", self.url, "--app-id", "demo",
                "--media", "none", "--identities", str(ids), "--cache-dir", str(cache), "--format", "json",
                "--concurrency", "32"]

    def put_cmd(self, cache: Path, lines: Path):
        return [self.fpctl, "cache", "put", "--cache-dir", str(cache), "--input", str(lines)]

    def measure(self, name, cmd):
        """An uncut run: its time and the flushes it caused."""
        flushes, start = self.m.disk.flushes, time.perf_counter()
        done = subprocess.run(cmd, capture_output=True)
        if done.returncode != 0:
            sys.exit(f"blockcut: {name} failed uncut: {done.stderr.decode()[-400:]}")
        self.uncut[name] = (time.perf_counter() - start, self.m.disk.flushes - flushes)

    def run_and_cut(self, name, cmd, trial):
        """Runs cmd and cuts the power during it; returns its output paths once everything is up again."""
        out, err = self.work / f"{name}-{trial}.out", self.work / f"{name}-{trial}.err"
        duration, flushes = self.uncut[name]
        r = self.tally(name)
        by_flush = trial % 2 == 1
        with out.open("wb") as o, err.open("wb") as e:
            proc = subprocess.Popen(cmd, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
            if by_flush:
                nth = self.rng.randint(1, max(1, flushes))
                self.m.disk.arm(nth, proc.pid)
                proc.wait(120)
                self.m.disk.disarm()
                moment = f"inside flush {nth} of {flushes}"
            else:
                # warm reports as it goes; put and build only at the end, so half of their cuts come after it.
                after = self.rng.uniform(0, duration * (1.1 if name == "warm" else 2.0))
                try:
                    proc.wait(after)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                moment = f"after {after:.3f}s of {duration:.3f}s"
        killed = proc.returncode == -signal.SIGKILL
        in_flush = self.m.disk.cut_in_flush and by_flush
        # A cut by time follows the writer's death, with write-back luck; one in a flush has happened.
        self.m.disk.cut(self.rng, 0.3)
        self.m.halt()
        self.m.boot()
        r["cuts"] += 1
        r["killed"] += killed
        r["in_flush"] += in_flush
        if self.args.verbose:
            print(f"{name} {trial}: cut {moment}, {'killed' if killed else 'done'}; "
                  f"stderr: {err.read_text(errors='replace')[-200:].strip()}", file=sys.stderr)
        return out, err

    def warm(self, trial):
        ids = self.work / f"ids-{trial}.jsonl"
        ids.write_text("".join(json.dumps({"user_id": f"u{trial}-{i}"}) + "\n" for i in range(self.args.identities)))
        if "warm" not in self.uncut:
            self.measure("warm", self.warm_cmd(self.m.mnt / "warm-uncut", ids))
        cache = self.m.mnt / f"warm-{trial}"
        out, _ = self.run_and_cut("warm", self.warm_cmd(cache, ids), trial)
        reported = {(r["placement"], r["fingerprint"]) for r in warm_rows(out)
                    if r.get("state") == "warmed" and r.get("delivery_source") == "network"}
        present = listed(self.fpctl, cache)
        r = self.tally("warm")
        r["checked"] += len(reported)
        r["lost"] += len(reported - present)
        r["problems"] += [f"warm {trial}: reported entry {p}/{f[:8]} lost" for p, f in sorted(reported - present)]
        r["problems"] += [f"warm {trial}: {f}" for f in verify_findings(self.fpctl, cache)]

    def put(self, trial):
        flow = ROOT / "bundles/demo/flows/paywall.json"
        n = self.args.identities
        lines = self.work / f"put-{trial}.jsonl"
        lines.write_text("".join(json.dumps({"placement": "paywall", "user_id": f"p{trial}-{i}", "attributes": {},
                                             "ttl_seconds": 300, "flow_file": str(flow)}) + "\n" for i in range(n)))
        if "put" not in self.uncut:
            self.measure("put", self.put_cmd(self.m.mnt / "put-uncut", lines))
        cache = self.m.mnt / f"put-{trial}"
        _, err = self.run_and_cut("put", self.put_cmd(cache, lines), trial)
        reported = f"wrote {n} entries" in err.read_text(errors="replace")
        present = listed(self.fpctl, cache)
        lost = n - len(present) if reported else 0
        r = self.tally("put")
        r["checked"] += n if reported else 0
        r["lost"] += lost
        if lost:
            r["problems"].append(f"put {trial}: said it wrote {n}, {len(present)} listed")
        r["problems"] += [f"put {trial}: {f}" for f in verify_findings(self.fpctl, cache)]

    def build(self, trial):
        source = ROOT / "bundles" / ("travel" if trial % 2 else "demo")
        if "build" not in self.uncut:
            uncut = self.m.mnt / "uncut.fpbundle"
            self.measure("build", [self.fpctl, "bundle", "build", str(source), "-o", str(uncut)])
        outdir = self.m.mnt / f"build-{trial}"
        outdir.mkdir()
        os.sync()  # the directory exists on the disk before the run, as an output directory would
        output = outdir / "out.fpbundle"
        out, _ = self.run_and_cut("build", [self.fpctl, "bundle", "build", str(source), "-o", str(output)], trial)
        digest, problems = check_build(self.fpctl, out, output, trial)
        r = self.tally("build")
        r["checked"] += 1 if digest else 0
        r["lost"] += 1 if digest and problems else 0
        r["problems"] += problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpctl", required=True)
    ap.add_argument("--cuts", type=int, default=6, help="power cuts per command")
    ap.add_argument("--identities", type=int, default=200)
    ap.add_argument("--size-mb", type=int, default=192)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--verbose", action="store_true", help="a line per cut on standard error")
    args = ap.parse_args()
    args.fpctl = str(Path(args.fpctl).resolve())
    if os.geteuid() != 0:
        sys.exit("blockcut: needs root (FUSE, losetup, mount)")
    work = Path(tempfile.mkdtemp(prefix="fpctl-blockcut-"))
    machine = Machine(work, args.size_mb)
    serve = subprocess.Popen([args.fpctl, "serve", str(ROOT / "bundles/demo"), "--port", "0", "-q"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = serve.stdout.readline().strip()
        if not url.startswith("http://"):
            sys.exit("blockcut: fpctl serve did not start")
        machine.boot(fresh=True)
        campaign = Campaign(args, work, machine, url)
        for trial in range(args.cuts):
            campaign.warm(trial)
            campaign.put(trial)
            campaign.build(trial)
        machine.halt()
        complaint = machine.fsck()
        print(f"power cuts under ext4 (seed {args.seed}; a volatile disk cache: unflushed blocks dropped, or kept "
              f"by chance after a cut by time; warm and put commit with syncfs, build with fsync):")
        failed = False
        for name, r in campaign.results.items():
            what = "reported bundles" if name == "build" else "reported entries"
            print(f"  {name:5} {r['cuts']:4} cuts ({r['killed']} mid-run, {r['in_flush']} inside a flush), "
                  f"{r['checked']:5} {what} checked, {r['lost']} lost or damaged, "
                  f"{len(r['problems'])} problems")
            for p in r["problems"][:20]:
                print(f"    {p}")
            failed |= bool(r["problems"])
        print(f"  e2fsck -fn after the last cut: {'clean' if complaint is None else complaint}")
        sys.exit(1 if failed or complaint is not None else 0)
    finally:
        serve.kill()
        machine.teardown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
