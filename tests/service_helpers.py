"""What the service's test modules share (tests/test_service_*.py): a service over a real store with the fake judge
server as the host's judge, results files, and waits for a run or a check to end."""
from __future__ import annotations

import json
import time
from pathlib import Path

from mmvet_core.service import BENCH_BUNDLED, BenchmarkChoice, GradingService, ServiceSettings

RESULTS = Path(__file__).resolve().parent / "data" / "results" / "llava-v1.5-13b.json"
HOST_KEY, VISITOR_KEY = "sk-host", "sk-visitor"
ALL, BARD = BenchmarkChoice(BENCH_BUNDLED), BenchmarkChoice(BENCH_BUNDLED, subset="Bard set (168)")


def make_service(tmp_path: Path, judge_url: str, **settings) -> GradingService:
    """A service whose host judge is the server at `judge_url` (private addresses allowed: it is on 127.0.0.1)."""
    return GradingService(ServiceSettings(**{"data_dir": tmp_path / "data", "host_key": HOST_KEY,
                                             "host_base_url": judge_url, "allow_private_endpoints": True,
                                             "run_concurrency": 8, **settings}))


def close(svc: GradingService) -> None:
    svc.jobs.shutdown()
    svc.store.close()


def tagged(tmp_path: Path, tag: str) -> str:
    preds = json.loads(RESULTS.read_text(encoding="utf-8"))
    path = tmp_path / f"llava-{tag}.json"
    path.write_text(json.dumps({k: f"{v} [{tag}]" for k, v in preds.items()}), encoding="utf-8")
    return str(path)


def wait_done(svc: GradingService, run_id: str, timeout: float = 180.0) -> dict:
    deadline = time.time() + timeout
    while svc.jobs.is_running(run_id):
        assert time.time() < deadline, "the run did not end"
        time.sleep(0.02)
    return svc.reading.status(run_id)


def wait_check(svc, choice, owner="me", timeout=120.0) -> str:
    deadline = time.time() + timeout
    while (state := svc.judges.judge_check_text(choice, owner))[1]:
        assert time.time() < deadline, "the check did not end"
        time.sleep(0.05)
    return state[0]


def estimate_paragraph(stdout: str) -> str:
    """The CLI's estimate (wrapped at 100 columns, its labels on lines of their own) as one line."""
    lines = stdout.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("official-equivalent estimate: "))
    end = next((i for i in range(start + 1, len(lines))
                if not lines[i].startswith(("  ", "IN-SAMPLE", "EXTRAPOLATED", "UNLIKE"))), len(lines))
    return " ".join(x.strip() for x in lines[start:end])
