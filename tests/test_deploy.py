"""The deployment kit (deploy/): `deploy/local-stack.sh` starts the whole stack on this machine (PostgreSQL from
Debian's package, 2 app replicas, 2 grading workers, nginx with deploy/nginx.conf on a free port), a run is graded
through nginx with the host's judge (the test judge) and shared under MMVET_PUBLIC_URL, and `stop` leaves no
process of the stack behind. The systemd units and the environment template name only settings the code reads."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from gradio_client import handle_file
from tests.api_client import ApiClient

from app import BENCH_BUNDLED, JUDGE_HOST
from tests.fake_judge import FakeJudgeServer, FakeState

ROOT = Path(__file__).resolve().parent.parent
STACK = ROOT / "deploy" / "local-stack.sh"
RESULTS = ROOT / "tests" / "data" / "results" / "llava-v1.5-7b.json"


def stack(action: str, folder: Path, env: dict) -> str:
    proc = subprocess.run(["bash", str(STACK), action, str(folder)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{action}: {proc.stdout}\n{proc.stderr}\n" + "\n".join(
        f"--- {log.name}\n{log.read_text()[-1500:]}" for log in folder.glob("*.log"))
    return proc.stdout


def processes_of(folder: Path) -> list[str]:
    """Command lines of the running processes that mention the stack's folder (its PostgreSQL, replicas' data
    folders, workers', nginx's prefix)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(folder) in cmdline or str(folder) in environ:
            found.append(f"{pid}: {cmdline[:200]}")
    return found


def test_the_local_stack_starts_grades_a_run_through_nginx_and_stops_leaving_nothing():
    assert shutil.which("nginx") or Path("/usr/sbin/nginx").exists(), "nginx is not installed (apt-get install nginx)"
    folder = Path(tempfile.mkdtemp(prefix="mmvet-stack-"))      # (under /tmp: the postgres user reaches it)
    folder.chmod(0o755)
    with FakeJudgeServer(FakeState(latency=0.01)) as judge:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_", "MMVET_"))}
        env.update(OPENAI_API_KEY="sk-stack", OPENAI_BASE_URL=judge.url.replace("127.0.0.1", "localhost"))
        try:
            out = stack("start", folder, env)
            url = re.search(r"open (http://127\.0\.0\.1:\d+/)", out).group(1)
            settings = dict(line.split("=", 1) for line in (folder / "stack.env").read_text().split())
            assert settings["MMVET_PUBLIC_URL"] == url
            client = ApiClient(url, verbose=False, download_files=False)
            run = client.predict(results=handle_file(str(RESULTS)), bench_c=BENCH_BUNDLED, bench_f=None, hub="",
                                 sub="All samples", n_runs=1, judge_c=JUDGE_HOST, url="", model="gpt-4-0613",
                                 key="", owner_tok="stack-owner-token-0123456789", api_name="/grade")
            assert run["share_url"] == f"{url}?run={run['run_id']}"         # the address visitors use
            deadline = time.monotonic() + 300
            while (status := client.predict(run["run_id"], api_name="/status"))["status"] != "done":
                assert status["status"] in ("queued", "running"), status
                assert time.monotonic() < deadline, status
                time.sleep(0.5)
            assert status["done"] == 218 and status["total_score"] is not None
            logs = [(folder / f"worker{n}.log").read_text() for n in (1, 2)]
            for log in logs:        # (the base URL given as localhost, compared as the replicas spell it)
                assert f"judge * at {judge.url};" in log
        finally:
            stack("stop", folder, env)
    left = processes_of(folder)
    assert left == [], left
    assert not (folder / "pids").exists()
    shutil.rmtree(folder, ignore_errors=True)


def test_the_service_units_and_the_environment_template_name_what_the_code_reads():
    """Every MMVET_* variable the template sets is one the settings read; the units run the two commands."""
    code = "".join(p.read_text() for p in (ROOT / "mmvet_core").rglob("*.py")) + (ROOT / "app.py").read_text()
    template = (ROOT / "deploy" / "mmvet-grader.env.example").read_text()
    named = set(re.findall(r"^#?(MMVET_[A-Z_]+)=", template, re.M))
    assert {"MMVET_DATABASE_URL", "MMVET_WORKERS", "MMVET_PUBLIC_URL", "MMVET_TRUSTED_PROXY_HOPS"} <= named
    assert [n for n in sorted(named) if n not in code] == []
    replica = (ROOT / "deploy" / "mmvet-grader@.service").read_text()
    worker = (ROOT / "deploy" / "mmvet-worker@.service").read_text()
    assert "ExecStart=/usr/bin/python3 app.py" in replica and "GRADIO_SERVER_PORT=%i" in replica
    assert "ExecStart=/usr/bin/python3 -m mmvet_core worker" in worker
    for unit in (replica, worker):
        assert "EnvironmentFile=/etc/mmvet-grader/env" in unit and "KillSignal=SIGTERM" in unit
