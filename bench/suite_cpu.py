"""Where the test suite's CPU goes: runs the README's parallel phase and prints the CPU of every process on the
machine by kind (the pytest workers, Chromium's renderers and other processes, the CLI processes the tests start,
apps started as processes, PostgreSQL, nginx, ...), with the phase's wall time (issue 32: on 2 cores the phase is
CPU-bound, so its time is its CPU divided by the cores).

Run by hand (not in CI), from the repository root, on an otherwise idle machine:

    python bench/suite_cpu.py                     # the parallel phase (-n auto --dist loadfile -m "not serial")
    python bench/suite_cpu.py -- tests/test_cli.py -p no:xdist     # any pytest arguments after --

Every process is sampled every 0.5 s (its user + system CPU); a process that existed before the run counts from
its first sample, and one that lived less than a sample is missed (a few CLI processes: a lower bound).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
PHASE = ["-q", "-n", "auto", "--dist", "loadfile", "-m", "not serial"]


def kind(p: psutil.Process) -> str:
    """What a process is, for the table."""
    name, cmd = p.name(), p.cmdline()
    line = " ".join(cmd)
    if name.startswith("chrom"):
        t = next((a[7:] for a in cmd if a.startswith("--type=")), "browser")
        return f"Chromium {t}"
    if name.startswith("node"):
        return "Playwright's driver (node)"
    if "postgres" in name:
        return "PostgreSQL"
    if "nginx" in name:
        return "nginx"
    if "python" in name or line.startswith(sys.executable) or "pytest" in line:
        if "-m mmvet_core" in line or "mmvet-grader" in line:
            return "CLI processes (python -m mmvet_core)"
        if "app.py" in line:
            return "apps started as processes (app.py)"
        if "-u -c" in line and "sys.stdin" in line:            # pytest-xdist's (execnet's) workers
            return "pytest workers (tests, in-process apps, fake judges)"
        if "pip" in line:
            return "pip"
        if "pytest" in line:
            return "pytest controller"
        return "other Python processes"
    return "other"


class Sampler(threading.Thread):
    """CPU seconds by `kind`, of every process that is not this one's (pid, start time)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.first: dict = {}
        self.last: dict = {}
        self.kinds: dict = {}
        self.stop = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self.stop.is_set():
            for p in psutil.process_iter():
                if p.pid == me:
                    continue
                try:
                    key = (p.pid, p.create_time())
                    t = p.cpu_times()
                    used = t.user + t.system
                    if key not in self.kinds:
                        self.kinds[key] = kind(p)
                        self.first[key] = used if p.create_time() < self.started else 0.0
                    self.last[key] = used
                except psutil.Error:
                    pass
            self.stop.wait(0.5)

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for key, k in self.kinds.items():
            if k == "other":
                continue
            out[k] = out.get(k, 0.0) + self.last[key] - self.first[key]
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pytest_args", nargs="*", help="pytest arguments (default: the README's parallel phase)")
    args = ap.parse_args()
    sampler = Sampler()
    sampler.started = time.time()
    sampler.start()
    t0 = time.monotonic()
    rc = subprocess.call([sys.executable, "-m", "pytest", *(args.pytest_args or PHASE)], cwd=ROOT)
    wall = time.monotonic() - t0
    sampler.stop.set()
    sampler.join()
    totals = sampler.totals()
    cpu = sum(totals.values())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"\nwall {wall:.0f} s; CPU {cpu:.0f} s in all on {cores} cores ({cpu / wall / cores:.0%} of them); "
          f"pytest exit code {rc}")
    for k, v in totals.items():
        if v >= 0.5:
            print(f"  {v:7.1f} s  {v / cpu:5.1%}  {k}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
