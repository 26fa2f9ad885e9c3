"""Upload attacks of issue 9 (rows 4 and 6), before and after the protections (run by hand, not in CI).

    python bench/attack_uploads.py [--bomb-entries 1990] [--xlsx-rows 1000000] [--csv-mb 10] [--parallel 6]

Row 4 (disk): a zip of the official metadata plus `--bomb-entries` entries of 1 MB of zeros (the audit's 2.2 MB
archive), validated 3 times. *Before* is what the app did: extract the whole archive into a fresh folder on each
validation (`safe_extract_zip` with its 2 GB default cap); *after* is `load_benchmark` with the app's limits
(`LoadLimits`: 4x the upload limit for the archive, a capped folder, only the metadata and named images).

Row 6 (memory and CPU): a VLMEvalKit .xlsx of `--xlsx-rows` rows (a few MB compressed; the audit's had 11 M), and
`--parallel` CSVs of `--csv-mb` MB each read at once (the audit's: 6 x 50 MB). *Before*: `read_results` in the
server process (here a child process, so that its peak can be measured without hurting this one); *after*:
`prescan` and `ParseBox` with the app's limits. Every "before" is measured in its own process: peak RSS of the
process tree (sampled every 20 ms), CPU seconds and wall seconds are printed.

Figures move with the machine's load. Scale the sizes down on a shared machine: the "before" cases are the
attacks themselves.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from mmvet_core.inputs.archive import ArchiveLimits  # noqa: E402
from mmvet_core.inputs.housekeeping import tree_size  # noqa: E402
from tests.hostile_files import write_raw_xlsx, write_zero_bomb  # noqa: E402

METADATA = ROOT / "assets" / "mm-vet.json"
UPLOAD_MB = 50


def make_csv(path: Path, mb: int) -> Path:
    line = "{},a short answer\n"
    with path.open("w") as fh:
        fh.write("index,prediction\n")
        i = 0
        while fh.tell() < mb * 1_000_000:
            fh.write("".join(line.format(i + k) for k in range(10_000)))
            i += 10_000
    return path


class TreePeak:
    """Peak RSS of a process and its descendants, sampled every 20 ms."""

    def __init__(self, pid: int):
        self.proc = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                procs = [self.proc] + self.proc.children(recursive=True)
                self.peak = max(self.peak, sum(p.memory_info().rss for p in procs if p.is_running()))
            except psutil.Error:
                pass
            self._stop.wait(0.02)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def run_case(code: str) -> dict:
    """Run `code` in a fresh Python; it prints one JSON line. Returns it with peak tree RSS, CPU and wall."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    peak = TreePeak(proc.pid)
    ps = psutil.Process(proc.pid)
    cpu = 0.0
    while proc.poll() is None:
        try:
            t = ps.cpu_times()
            cpu = t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
        time.sleep(0.05)
    out, err = proc.communicate()
    wall = time.monotonic() - start
    try:
        result = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        result = {"outcome": f"crashed: {err.strip().splitlines()[-1] if err.strip() else proc.returncode}"}
    result.update(peak_rss_mb=round(peak.stop() / 1e6), cpu_s=round(max(cpu, result.get("cpu_s", 0)), 1),
                  wall_s=round(wall, 1))
    return result


PRELUDE = f"""
import json, resource, sys, time, threading
sys.path.insert(0, {str(ROOT)!r})
def done(**kw):
    r = resource.getrusage(resource.RUSAGE_SELF); c = resource.getrusage(resource.RUSAGE_CHILDREN)
    kw["cpu_s"] = r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime
    print(json.dumps(kw))
"""


def row(name: str, before: dict, after: dict, extra: str = "") -> None:
    print(f"\n{name}")
    for label, r in (("before", before), ("after", after)):
        figures = ", ".join(f"{k} {v}" for k, v in r.items() if k != "outcome")
        print(f"  {label:6}: {r.get('outcome', '')}\n          {figures}")
    if extra:
        print(f"  {extra}")


def parse_in_parallel(files: list[str], skip_before: bool, before_outcome: str, after_outcome: str
                      ) -> tuple[dict, dict]:
    """Parse `files` at once on threads, before (plain readers) and after (prescan + the parse worker)."""
    before = {"outcome": "skipped"} if skip_before else run_case(f"""
        from mmvet_core.results import read_results
        out = []
        threads = [threading.Thread(target=lambda p=p: out.append(len(read_results(p).predictions)))
                   for p in {files!r}]
        [t.start() for t in threads]; [t.join() for t in threads]
        done(outcome={before_outcome})
        """)
    after = run_case(f"""
        from mmvet_core.parsebox import ParseBox, prescan
        from mmvet_core.results import read_results, ResultsError
        box = ParseBox(); out = []
        def one(p):
            try:
                prescan(p); box.call(read_results, p); out.append("parsed")
            except ResultsError as e:
                out.append("refused: " + str(e)[:70])
        threads = [threading.Thread(target=one, args=(p,)) for p in {files!r}]
        [t.start() for t in threads]; [t.join() for t in threads]
        done(outcome={after_outcome})
        """)
    return before, after


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bomb-entries", type=int, default=1990)
    ap.add_argument("--xlsx-rows", type=int, default=1_000_000)
    ap.add_argument("--csv-mb", type=int, default=10)
    ap.add_argument("--parallel", type=int, default=6)
    ap.add_argument("--skip-before", action="store_true", help="only the protected runs")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="attack-uploads-"))
    try:
        # ---- row 4: disk ------------------------------------------------------------------------------
        bomb = write_zero_bomb(tmp / "mm-vet.zip", METADATA, args.bomb_entries)
        print(f"zip: {bomb.stat().st_size / 1e6:.1f} MB holding {args.bomb_entries:,} x 1 MB of zeros")
        before_dir, after_dir = tmp / "before-uploads", tmp / "after-uploads"
        before = {"outcome": "skipped"} if args.skip_before else run_case(f"""
            import tempfile
            from pathlib import Path
            from mmvet_core.archive import safe_extract_zip
            root = Path({str(before_dir)!r}); root.mkdir()
            for _ in range(3):   # each validation extracted the whole archive into a fresh folder
                safe_extract_zip({str(bomb)!r}, Path(tempfile.mkdtemp(dir=root)) / "x")
            done(outcome="extracted 3 times")
            """)
        if not args.skip_before:
            before["disk_mb"] = round(tree_size(before_dir) / 1e6)
            shutil.rmtree(before_dir, ignore_errors=True)
        limits = ArchiveLimits(max_total_uncompressed=4 * UPLOAD_MB * 1024 * 1024)
        after = run_case(f"""
            from pathlib import Path
            from mmvet_core.archive import ArchiveLimits
            from mmvet_core.housekeeping import FolderPolicy
            from mmvet_core.inputs.sources import LoadLimits, load_benchmark
            from mmvet_core.benchmark import BenchmarkError
            limits = LoadLimits(archive=ArchiveLimits(max_total_uncompressed={limits.max_total_uncompressed}),
                                folder=FolderPolicy(max_bytes=2_000_000_000))
            msg = ""
            for _ in range(3):
                try:
                    load_benchmark({str(bomb)!r}, work_dir=Path({str(after_dir)!r}), limits=limits)
                except BenchmarkError as e:
                    msg = str(e)
            done(outcome="refused 3 times: " + msg[:90])
            """)
        after["disk_mb"] = round(tree_size(after_dir) / 1e6, 1)
        row(f"row 4: validate the {bomb.stat().st_size / 1e6:.1f} MB zip 3 times", before, after)

        # ---- row 6: an xlsx of many rows ----------------------------------------------------------------
        xlsx = write_raw_xlsx(tmp / "m_MMVet.xlsx", args.xlsx_rows)
        print(f"\nxlsx: {xlsx.stat().st_size / 1e6:.1f} MB holding {args.xlsx_rows:,} rows")
        before = {"outcome": "skipped"} if args.skip_before else run_case(f"""
            from mmvet_core.results import read_results, ResultsError
            try:
                rf = read_results({str(xlsx)!r}); done(outcome=f"parsed {{len(rf.predictions):,}} predictions")
            except ResultsError as e:
                done(outcome="refused after parsing: " + str(e)[:90])
            """)
        after = run_case(f"""
            from mmvet_core.parsebox import ParseBox, prescan
            from mmvet_core.results import read_results, ResultsError
            try:
                prescan({str(xlsx)!r}); ParseBox().call(read_results, {str(xlsx)!r}); done(outcome="parsed")
            except ResultsError as e:
                done(outcome="refused: " + str(e)[:90])
            """)
        row(f"row 6: one {xlsx.stat().st_size / 1e6:.1f} MB xlsx of {args.xlsx_rows:,} rows", before, after)

        # ---- row 6: parallel CSVs ------------------------------------------------------------------------
        csvs = [make_csv(tmp / f"m{i}_MMVet.csv", args.csv_mb) for i in range(args.parallel)]
        files = [str(p) for p in csvs]
        before, after = parse_in_parallel(files, args.skip_before,
                                          'f"parsed {len(out)} files of {out[0] if out else 0:,} rows"',
                                          'f"{len(out)} files: " + out[0]')
        row(f"row 6: {args.parallel} CSVs of {args.csv_mb} MB at once (many short rows)", before, after)

        # ---- row 6: parallel CSVs under the row cap (few huge cells) -------------------------------------
        wide = []
        for i in range(args.parallel):
            p = tmp / f"w{i}_MMVet.csv"
            cell = "y" * (args.csv_mb * 1_000_000 // 218)
            p.write_text("index,prediction\n" + "".join(f"{k},{cell}\n" for k in range(218)))
            wide.append(str(p))
        before, after = parse_in_parallel(wide, args.skip_before, 'f"parsed {len(out)} files"',
                                          'f"{len(out)} files: " + ", ".join(sorted(set(out)))')
        row(f"row 6: {args.parallel} CSVs of {args.csv_mb} MB at once (218 rows of huge answers)", before, after,
            "after: at most 2 parses at once, each in a worker limited to +1.5 GB, 60 s CPU, 90 s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
