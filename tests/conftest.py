"""Shared fixtures (a running fake judge server, a store in ``tmp_path``) and the environment of CLI subprocesses."""
from __future__ import annotations

import os
import sys
from pathlib import Path

# Bytecode is written and read (``__pycache__``, ignored by git) even where PYTHONDONTWRITEBYTECODE is set, as on
# this machine: the suite starts ≈ 200 Python processes (CLI commands, apps, workers, four xdist workers), and each
# compiled the package from source (≈ 0.2 CPU-s) and the workers rewrote every test module (≈ 4 CPU-s each).
# Before anything of ours is imported, and for the processes the tests start.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import pytest  # noqa: E402

from mmvet_core.store import Store  # noqa: E402
from tests.fake_judge import FakeJudgeServer  # noqa: E402
from tests.pg_server import PostgresServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKERS_PER_CORE, MAX_WORKERS = 2, 8


def _one_default_tls_context_per_process() -> None:
    """httpx builds a verifying TLS context (the whole CA bundle: 27 ms) for every client, and the tests make
    thousands of plain-HTTP calls to 127.0.0.1 through new clients (``httpx.get``/``post``, gradio_client, the MCP
    client): 6 % of the workers' CPU under py-spy. Contexts built with the default arguments are shared within a
    test process, as the judge's clients share theirs (`mmvet_core.judging.transport.default_ssl_context`); a
    client with other arguments gets its own, as before."""
    import functools

    import httpx._config
    import httpx._transports.default as transports

    build = httpx._config.create_ssl_context

    @functools.lru_cache(maxsize=4)
    def shared(trust_env: bool, cert_file: str | None, cert_dir: str | None):
        return build(verify=True, cert=None, trust_env=trust_env)

    def create_ssl_context(verify=True, cert=None, trust_env=True):
        if verify is True and cert is None:
            return shared(trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        return build(verify=verify, cert=cert, trust_env=trust_env)

    transports.create_ssl_context = create_ssl_context


_one_default_tls_context_per_process()


@pytest.hookimpl(optionalhook=True)          # (a hook of pytest-xdist: without it, pytest must not refuse this file)
def pytest_xdist_auto_num_workers(config) -> int | None:
    """What ``-n auto`` (the README's test command) starts: two workers per core this process may run on, at most
    8. A worker of the app's tests often waits (for Chromium, the app, a judge the test holds), so one per core
    leaves cores idle (2 cores: the 4 workers the suite's timing was measured with); each worker runs its own
    Chromium and servers, hence the cap. Nothing in the suite depends on how many there are or on how busy they
    make the machine. ``PYTEST_XDIST_AUTO_NUM_WORKERS=N`` still decides when set (xdist's own rule)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(MAX_WORKERS, WORKERS_PER_CORE * cores))


#: The longest modules, longest first (seconds in the README's parallel phase, 4 workers on 2 cores, 2026-12-06: ux 173,
#: app_leaderboard 91, app_judgecheck 85, app_browser 76, app_judge_attacks 66, many_machines 65, ratelimit 61, docs
#: 57, app_page 46, workers 45, package 44, service_check_attacks 42; the phase ≈ 410; deploy ≈ 18 alone, in this
#: phase since 2026-12-07), handed out to the workers first: with ``--dist loadfile`` a worker takes whole modules in
#: this order, then the others in collection order, and a long module taken last would run alone while the other
#: workers sit idle. Only the order between modules changes, never within one.
LONG_MODULES = ("test_app_ux", "test_app_leaderboard", "test_app_judgecheck", "test_app_browser",
                "test_app_judge_attacks", "test_many_machines", "test_ratelimit", "test_docs", "test_app_page",
                "test_workers", "test_deploy", "test_package", "test_service_check_attacks", "test_app_uploads",
                "test_app_ratelimit", "test_app_mcp", "test_app_grade_files", "test_app_sessions", "test_grading",
                "test_app_xss")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config) -> None:
    """Keep `LONG_MODULES`' order under ``--dist loadfile``: pytest-xdist (3.x) otherwise hands out the modules
    sorted by their number of tests, which sends a long module of few tests (an app, a browser) out last, to run
    alone at the end while the other workers sit idle (the controller reads this option; workers ignore it)."""
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False
    if not os.environ.get("PYTEST_XDIST_WORKER"):    # the workers and every process they start import it compiled
        _compile_the_package()
    # pytest's unraisable-exception check ends each process with five full garbage collections (Trio's constant):
    # 0.7 CPU-s each on a worker's heap (Gradio, pandas), 2 % of the workers' CPU, at the end of the run where
    # they hold up the last worker. One still collects what the suite leaves unreferenced, and reports it.
    try:
        from _pytest.unraisableexception import gc_collect_iterations_key
    except ImportError:                     # (another pytest: its own default)
        return
    config.stash[gc_collect_iterations_key] = 1


def _compile_the_package() -> None:
    """Bytecode for every module of the checkout but the test modules (pytest compiles those itself, rewriting
    their asserts): 0.5 CPU-s once, up to date afterwards, instead of a compilation by each process that starts."""
    import compileall
    import re

    for folder in ("mmvet_core", "mmvet_app", "tests"):
        compileall.compile_dir(ROOT / folder, quiet=1, rx=re.compile(r"[\\/]test_[^\\/]*\.py$"))


def pytest_ignore_collect(collection_path, config):
    """Under ``-m serial`` alone (the README's second phase), a file that marks no test `serial` is not imported:
    importing the whole suite and every module's doctests only to deselect them cost that phase ≈ 8 s."""
    if config.getoption("markexpr", "") != "serial" or collection_path.suffix != ".py" \
            or collection_path.name == "conftest.py":
        return None
    return "mark.serial" not in collection_path.read_text(encoding="utf-8")


def pytest_collection_modifyitems(config, items) -> None:
    def rank(item) -> int:
        name = item.path.stem
        return LONG_MODULES.index(name) if name in LONG_MODULES else len(LONG_MODULES)
    items.sort(key=rank)          # stable: the order within a module and among the others is kept


def cli_env(**extra: str) -> dict[str, str]:
    """Environment for ``python -m mmvet_core`` in a subprocess: the package importable from any working directory,
    no judge variables inherited from the developer's shell, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return {**env, **extra}


@pytest.fixture
def fake_judge():
    """A fresh `FakeJudgeServer` (no latency, no faults); ``fake_judge.state`` injects faults and logs calls."""
    with FakeJudgeServer() as server:
        yield server


@pytest.fixture
def svc(tmp_path, fake_judge):
    """A `GradingService` over a store in `tmp_path` whose host judge is `fake_judge` (tests/service_helpers.py);
    a module with a service of other settings defines its own `svc`."""
    from tests.service_helpers import close, make_service

    s = make_service(tmp_path, fake_judge.url)
    yield s
    close(s)


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "grader.db")
    yield s
    s.close()


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server of this test process (tests/pg_server.py; each xdist worker starts its own). Fails,
    never skips, when PostgreSQL is not installed."""
    with PostgresServer() as server:
        yield server


@pytest.fixture
def pg_url(pg_server):
    """The URL of a new, empty PostgreSQL database (dropped after the test)."""
    url = pg_server.new_database()
    yield url
    pg_server.drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_location(request, tmp_path):
    """Where a store lives, once per backend: a SQLite file in `tmp_path`, then a new PostgreSQL database."""
    if request.param == "sqlite":
        yield tmp_path / "grader.db"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def any_store(db_location):
    """A `Store` on each backend in turn (see `db_location`)."""
    s = Store(db_location)
    yield s
    s.close()
