"""Many machines, end to end: two app replicas (`python app.py`, MMVET_WORKERS=external) behind nginx with the
shipped configuration (deploy/nginx.conf), two grading workers (`python -m mmvet_core worker`), one PostgreSQL
database, the test judge server. A visitor starts a run through replica 1; a share-link viewer follows it on
replica 2; the worker grading it is killed with SIGKILL while its calls are in flight; the other worker takes the
run over and finishes it; every judge answer was given (and billed) once; the viewer's page showed it all live.

The judge holds its calls after a number of answers (tests/call_gate.py), so the kill lands mid-run with calls in
flight, whatever the machine's speed; a held call whose client died is never answered (``gone``).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.app_fixtures import (  # noqa: F401  (fixtures)
    HOST_KEY, RESULTS_DIR, browser, new_context, tracked_page, upload_results, wait_loaded, wait_progress)
from tests.call_gate import CallGate
from tests.fake_judge import FakeJudgeServer, FakeState, free_port
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
NGINX = "/usr/sbin/nginx"
NGINX_CONF = ROOT / "deploy" / "nginx.conf"
RESULTS = RESULTS_DIR / "llava-v1.5-7b.json"
LEASE = 2.0                  # seconds: how long a dead worker's run waits before another takes it
HOLD_AFTER = 60              # answers before the judge holds its calls (the kill lands then)


def render_nginx(tmp: Path, port: int, replicas: list[int]) -> Path:
    """The shipped site configuration with this test's ports, inside a main configuration of the test's own (its
    prefix, pid and temp folders in `tmp`, no daemon): what a Debian host's nginx.conf does with conf.d/."""
    site = NGINX_CONF.read_text()
    for old, new in [("listen 80;", f"listen 127.0.0.1:{port};"),
                     ("server 127.0.0.1:7861 ", f"server 127.0.0.1:{replicas[0]} "),
                     ("server 127.0.0.1:7862 ", f"server 127.0.0.1:{replicas[1]} ")]:
        assert site.count(old) == 1, f"deploy/nginx.conf no longer has {old!r}"
        site = site.replace(old, new)
    (tmp / "temp").mkdir(parents=True)
    (tmp / "site.conf").write_text(site)
    user = "user root;" if os.geteuid() == 0 else ""        # nginx's workers would otherwise run as nobody
    (tmp / "nginx.conf").write_text(f"""{user}
worker_processes 1;
daemon off;
pid nginx.pid;
error_log stderr warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path temp/body; proxy_temp_path temp/proxy; fastcgi_temp_path temp/fastcgi;
    uwsgi_temp_path temp/uwsgi; scgi_temp_path temp/scgi;
    include site.conf;
}}
""")
    return tmp / "nginx.conf"


def get(url: str, cookie: str | None = None, timeout: float = 10, forwarded: str | None = None) -> str:
    headers = {"Cookie": f"mmvet_replica={cookie}"} if cookie else {}
    if forwarded:
        headers["X-Forwarded-For"] = forwarded
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as r:
        return r.read().decode()


def wait_http(url: str, procs: list[subprocess.Popen], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            get(url, timeout=2)
            return
        except OSError:
            for p in procs:
                assert p.poll() is None, f"{p.args} exited with {p.returncode}"
            assert time.monotonic() < deadline, f"{url} did not answer"
            time.sleep(0.1)


def answered(judge: FakeState) -> int:
    """Chat calls the judge answered (and billed)."""
    return sum(c.get("status") == 200 for c in judge.calls)


@pytest.fixture
def cluster(tmp_path, pg_url):
    """PostgreSQL, the judge, two workers, two app replicas and nginx in front of them, all on 127.0.0.1."""
    assert Path(NGINX).exists(), ("nginx is not installed: this test puts the app's replicas behind Debian's nginx "
                                  "(`apt-get install -y nginx`, part of the README's test command)")
    procs: dict[str, subprocess.Popen] = {}
    logs = []
    with FakeJudgeServer(FakeState(latency=0.02)) as judge:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_", "MMVET_"))}
        base.update(PYTHONPATH=str(ROOT), MMVET_DATABASE_URL=pg_url, OPENAI_API_KEY=HOST_KEY,
                    OPENAI_BASE_URL=judge.url, MMVET_LEASE_SECONDS=str(LEASE), GRADIO_ANALYTICS_ENABLED="False",
                    HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")

        def spawn(name: str, argv: list[str], **env: str) -> subprocess.Popen:
            log = open(tmp_path / f"{name}.log", "w")
            logs.append(log)
            procs[name] = subprocess.Popen(argv, cwd=ROOT, env={**base, **env}, stdout=log,
                                           stderr=subprocess.STDOUT)
            return procs[name]

        ports = [free_port(), free_port()]
        try:
            # each replica and worker is a machine of its own: its own data folder, one database
            for i, port in enumerate(ports, 1):
                spawn(f"replica{i}", [sys.executable, "app.py"], GRADIO_SERVER_NAME="127.0.0.1",
                      GRADIO_SERVER_PORT=str(port), MMVET_DATA_DIR=str(tmp_path / f"replica{i}"),
                      GRADIO_TEMP_DIR=str(tmp_path / f"replica{i}-gradio"), MMVET_WORKERS="external",
                      MMVET_TRUSTED_PROXY_HOPS="1")
            for port in ports:        # (the replicas create the schema; a worker never migrates it)
                wait_http(f"http://127.0.0.1:{port}/gradio_api/info", list(procs.values()))
            for i in (1, 2):
                spawn(f"worker{i}", [sys.executable, "-m", "mmvet_core", "worker", "--poll", "0.2"],
                      MMVET_DATA_DIR=str(tmp_path / f"worker{i}"))
            nginx_port = free_port()
            conf = render_nginx(tmp_path / "nginx", nginx_port, ports)
            spawn("nginx", [NGINX, "-p", str(conf.parent) + "/", "-c", "nginx.conf"])
            wait_http(f"http://127.0.0.1:{nginx_port}/gradio_api/info", list(procs.values()))
            yield {"judge": judge, "procs": procs, "replicas": [f"http://127.0.0.1:{p}/" for p in ports],
                   "url": f"http://127.0.0.1:{nginx_port}/", "pg_url": pg_url, "tmp": tmp_path}
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs.values():
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            for log in logs:
                log.close()


def app_id(url: str, **how) -> str:
    return json.loads(get(url + "gradio_api/app_id", **how))["app_id"]


def nginx_replica(cluster) -> int:
    """The replica nginx routes this machine's address to (each replica answers its own app id)."""
    ids = [app_id(url) for url in cluster["replicas"]]
    assert ids[0] != ids[1]
    return ids.index(app_id(cluster["url"]))


def page_at(browser, url: str, path: str = "", owner_token: str | None = None):
    """A browser page of `url` (nginx, or one replica directly), with the visitor's stored owner token when
    given (the page keeps it in the browser's storage, which is per origin)."""
    context = new_context(browser)
    if owner_token is not None:
        context.add_init_script(f"localStorage.setItem('mmvet-grader-owner', {json.dumps(owner_token)});")
    page = tracked_page(context)                         # (the suite's one timeout: only a broken page nears it)
    page.goto(url + path)
    wait_loaded(page)
    return page


def test_nginx_routes_by_the_clients_address_never_by_what_it_sends(tmp_path):
    """Issue 33: nginx routed on a `mmvet_replica` cookie the client sets: alternating two values spread one
    client's 300 requests over both replicas (0 refused instead of 109). The shipped configuration now hashes the
    address: whatever cookie or X-Forwarded-For a client sends, its requests reach one replica."""
    import http.server
    import threading

    assert Path(NGINX).exists(), "nginx is not installed (`apt-get install -y nginx`)"
    servers = []
    for name in ("one", "two"):
        class Handler(http.server.BaseHTTPRequestHandler):
            answer = json.dumps({"app_id": name}).encode()

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Length", str(len(self.answer)))
                self.end_headers()
                self.wfile.write(self.answer)

            def log_message(self, *args):
                pass
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    port = free_port()
    conf = render_nginx(tmp_path / "nginx", port, [s.server_port for s in servers])
    proc = subprocess.Popen([NGINX, "-p", str(conf.parent) + "/", "-c", "nginx.conf"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_http(url + "gradio_api/app_id", [proc])
        seen = {app_id(url, cookie=f"visitor-{n}", forwarded=f"198.51.100.{n}") for n in range(40)}
        seen |= {app_id(url) for _ in range(5)}
        assert len(seen) == 1, seen
        assert "$cookie_" not in NGINX_CONF.read_text()
    finally:
        proc.terminate()
        proc.wait(10)
        for server in servers:
            server.shutdown()
            server.server_close()


def test_a_run_survives_its_workers_death_and_is_followed_live_on_another_replica(cluster, browser):
    from mmvet_core.store import Store

    judge, procs = cluster["judge"].state, cluster["procs"]
    store = Store(cluster["pg_url"], check=False)           # what the test reads of the database
    mine = nginx_replica(cluster)                           # where nginx sends this machine's address
    other = cluster["replicas"][1 - mine]
    owner = page_at(browser, cluster["url"])                # the visitor, through nginx
    try:
        upload_results(owner, RESULTS)
        expect(owner.locator("#validation-report textarea")).to_have_value(re.compile("218 of 218"), timeout=60_000)
        gate = judge.gate = CallGate()
        gate.release(HOLD_AFTER)
        owner.locator("#grade-button").click()
        expect(owner).to_have_url(re.compile(r"\?run=[\w-]{24}$"), timeout=60_000)
        run_id = owner.url.rsplit("run=", 1)[1]
        expect(owner.locator("#share-link textarea")).to_have_value(re.compile(rf"\?run={run_id}$"))

        # a viewer of the share link, on the other replica, while a worker grades the run
        viewer = page_at(browser, other, f"?run={run_id}")
        wait_progress(viewer, r"^running: [1-9]\d* / 218", timeout=60)
        # the kill lands with calls in flight (held by the judge: never answered) and every answer given stored
        # (an answer still on the wire when its process dies is the one thing a kill can cost twice)
        wait_until(lambda: gate.held > 0 and judge.in_flight == 0 and store.cache_size() == answered(judge), 60,
                   "the worker's calls held after the first answers")

        # a worker grading slices of it dies (both do: a run is cut in slices that every worker takes)
        dying, survivor = "worker1", "worker2"
        procs[dying].send_signal(signal.SIGKILL)
        procs[dying].wait(10)
        wait_until(lambda: sum(c.get("status") == "gone" for c in judge.calls) >= 1, 30,
                   "the dead worker's connections to close")
        # the calls in flight at its death (held, or gone with it) and the survivor's held ones: an upper bound
        in_flight = gate.held + sum(c.get("status") == "gone" for c in judge.calls)
        gate.open()

        # the other worker takes the run over once the lease has passed, and finishes it
        wait_progress(viewer, r"^done: 218 / 218", timeout=120)
        wait_progress(owner, r"^done: 218 / 218", timeout=30)
        assert store.get_run(run_id).status == "done"
        wait_until(lambda: store.queued_run(run_id) is None, 30, "the survivor to release the run's row")
        expect(viewer.locator("#run-card")).to_contain_text(run_id)
        expect(viewer.locator("#total-score textarea")).to_have_value(re.compile(r"^Total: \d+\.\d"))
        assert viewer.url.endswith(f"?run={run_id}")        # the same page, never reloaded

        # the visitor on the other replica (nginx's replica gone, say): still the owner of its run there
        token = owner.evaluate("localStorage.getItem('mmvet-grader-owner')")
        moved = page_at(browser, other, f"?run={run_id}", owner_token=token)
        expect(moved.locator("#my-runs-table")).to_contain_text(run_id)
        expect(moved.locator("#rename-button")).to_be_visible()
        moved.context.close()
    finally:
        owner.context.close()
        if "viewer" in locals():
            viewer.context.close()
        store.close()

    # every answer the judge gave was paid once, but for calls in flight at the kill
    asked = Counter((c["prompt"], c["temperature"]) for c in judge.calls if c.get("status") == 200)
    assert asked and sum(n - 1 for n in asked.values()) <= in_flight, asked.most_common(3)
    assert sum(c.get("status") == "gone" for c in judge.calls) >= 1        # calls were in flight at the kill
    log = (cluster["tmp"] / f"{survivor}.log").read_text()
    assert "stopped answering: queued again" in log, log[-2000:]
