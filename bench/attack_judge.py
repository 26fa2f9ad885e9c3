"""Attacks on the judge path, measured (issue 9 rows 5, 7, 9, 10): run by hand, prints one figure per attack.

    python bench/attack_judge.py                      # every attack with the real defaults (takes ~5 minutes)
    python bench/attack_judge.py --only body,tokens   # a selection
    python bench/attack_judge.py --timeout 5          # shorter judge timeouts (figures scale with them)

Each attack runs against `tests/fake_judge.py` on 127.0.0.1 in one of its hostile modes:

- ``body``: the endpoint answers 200 with a `--body-mb` MB body (1 GB by default). Printed: the peak RSS of a
  fresh process making that one judge call, its wall time and the error it gets.
- ``hang`` / ``drip``: the endpoint never answers / drips one byte every `--drip-every` s. Printed: seconds until
  the call's first error (given up at `--max-wait`), with the judge's default timeout and retries.
- ``stop``: a run on the never-answering endpoint is stopped after its first calls went out. Printed: seconds
  from Stop until the run has ended (given up at `--max-wait`).
- ``tokens``: a visitor grades 218 padded predictions (~67x the prompt tokens) with the host's key under a
  per-visitor budget of `--visitor-calls` calls (and, where the code has it, the default token budget). Printed:
  the calls and tokens the host paid, and tokens per charged call.
- ``xff``: the app is started with the host's key on a fake judge and a per-visitor budget of `--visitor-calls`
  calls; one client sends `--rotations` grading requests, each with a new X-Forwarded-For. Printed: the judge
  calls the host paid for that one client.

To measure an older version, point `--code` at a plain copy of it (for instance ``git archive <commit>``
extracted into a folder, with this repository's ``tests/fake_judge.py`` copied in); the bench then imports
``mmvet_core`` and ``app`` from there and adapts to what that version has.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "tests" / "data" / "results" / "llava-v1.5-13b.json"


def _setup_path(code: Path) -> None:
    sys.path.insert(0, str(code))


def _settings(url: str, timeout: float | None):
    from mmvet_core.judging.judge import JudgeSettings

    return JudgeSettings(base_url=url, **({} if timeout is None else {"timeout": timeout}))


async def _first_error(url: str, timeout: float | None, max_wait: float) -> tuple[float, str]:
    from mmvet_core.judging.judge import JudgeError, make_judge

    judge = make_judge(_settings(url, timeout), "sk-bench")
    t0 = time.monotonic()
    try:
        await asyncio.wait_for(judge.complete("Q\nq | a | p", 0.0), max_wait)
        return time.monotonic() - t0, "answered"
    except JudgeError as e:
        return time.monotonic() - t0, f"{e.kind}: {str(e)[:90]}"
    except asyncio.TimeoutError:
        return time.monotonic() - t0, f"no error yet after {max_wait:g} s (given up)"
    finally:
        await judge.aclose()


def attack_body(args) -> None:
    from tests.fake_judge import FakeJudgeServer, FakeState

    with FakeJudgeServer(FakeState(huge_body=args.body_mb << 20)) as srv:
        child = (
            "import asyncio, sys, time\n"
            f"sys.path.insert(0, {str(args.code)!r})\n"
            "from mmvet_core.judging.judge import JudgeSettings, JudgeError, make_judge\n"
            "async def go():\n"
            f"    j = make_judge(JudgeSettings(base_url={srv.url!r}, max_retries=0), 'sk-bench')\n"
            "    t0 = time.monotonic()\n"
            "    try:\n"
            "        r = await j.complete('Q\\nq | a | p', 0.0)\n"
            "        out = 'answered ' + repr(r.content)\n"
            "    except JudgeError as e:\n"
            "        out = f'{e.kind}: {str(e)[:80]}'\n"
            "    finally:\n"
            "        await j.aclose()\n"
            "    print(f'{time.monotonic() - t0:.1f} s; {out}')\n"
            "asyncio.run(go())\n")
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=args.max_wait)
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        tail = (proc.stdout.strip() or proc.stderr.strip().splitlines()[-1:] or ["?"])
        print(f"body {args.body_mb} MB: peak RSS of the calling process {peak_mb:,.0f} MB "
              f"(previous child peak {before / 1024:,.0f} MB); {tail if isinstance(tail, str) else tail[0]}")


def attack_hang_or_drip(args, mode: str) -> None:
    from tests.fake_judge import FakeJudgeServer, FakeState

    state = FakeState(hang=True) if mode == "hang" else FakeState(drip_every=args.drip_every)
    with FakeJudgeServer(state) as srv:
        seconds, what = asyncio.run(_first_error(srv.url, args.timeout, args.max_wait))
    label = "never answers" if mode == "hang" else f"drips a byte every {args.drip_every:g} s"
    print(f"{mode}: endpoint that {label}: first error after {seconds:.1f} s ({what}); "
          f"requests received: {len(state.calls)}")


def attack_stop(args) -> None:
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.runs.jobs import JobManager
    from mmvet_core.judging.judge import make_judge
    from mmvet_core.runs.lifecycle import create_run
    from mmvet_core.store import Store
    from tests.fake_judge import FakeJudgeServer, FakeState

    with tempfile.TemporaryDirectory() as tmp, FakeJudgeServer(FakeState(hang=True)) as srv:
        store = Store(Path(tmp) / "g.db")
        jobs = JobManager(store)
        bench = load_bundled_v1()
        preds = json.loads(RESULTS.read_text())
        settings = _settings(srv.url, args.timeout)
        run_id = create_run(store, benchmark=bench, spec="mmvet-v1", predictions=preds, n_runs=1,
                            settings=settings, model_name="m")
        jobs.start(run_id, bench, make_judge(settings, "sk-bench"), concurrency=4)
        while len(srv.state.calls) < 4:
            time.sleep(0.05)
        t0 = time.monotonic()
        jobs.stop(run_id)
        try:
            outcome = jobs.wait(run_id, timeout=args.max_wait)
            what = f"{outcome.status}: {outcome.message}" if outcome else "ended"
        except Exception:       # concurrent.futures.TimeoutError
            what = f"still running after {args.max_wait:g} s (given up)"
        print(f"stop: a run on a never-answering endpoint ended {time.monotonic() - t0:.1f} s after Stop ({what})")


def attack_tokens(args) -> None:
    from mmvet_core.judging import budget as budget_mod
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.judging.grading import grade_run
    from mmvet_core.judging.judge import make_judge
    from mmvet_core.runs.lifecycle import create_run
    from mmvet_core.store import Store
    from tests.fake_judge import FakeJudgeServer

    preds = json.loads(RESULTS.read_text())
    bench = load_bundled_v1()
    with tempfile.TemporaryDirectory() as tmp, FakeJudgeServer() as srv:
        store = Store(Path(tmp) / "g.db")
        settings = _settings(srv.url, args.timeout)
        results = {}
        for name, pad in (("ordinary", ""), ("padded", " padding" * 25_000)):
            run_id = create_run(store, benchmark=bench, spec="mmvet-v1", n_runs=1, settings=settings,
                                model_name=name, predictions={k: preds[k] + pad for k in bench.ids})
            limits = budget_mod.BudgetLimits(per_visitor_daily=args.visitor_calls, global_daily=0)
            host = budget_mod.HostBudget(store, limits)
            refusal = None
            if pad and hasattr(budget_mod, "check_prediction_lengths"):
                refusal = budget_mod.check_prediction_lengths(
                    {k: preds[k] + pad for k in bench.ids}, limits.max_prediction_chars)
            n0 = len(srv.state.completed_calls())

            async def go():
                judge = make_judge(settings, "sk-host")
                try:
                    return await grade_run(store, run_id, bench, judge, concurrency=16,
                                           budget=host.hook(f"visitor-{name}"))
                finally:
                    await judge.aclose()
            outcome = asyncio.run(go())
            calls = srv.state.completed_calls()[n0:]
            tokens = sum(len(c["prompt"]) // 4 + 2 for c in calls)
            results[name] = (len(calls), tokens)
            extra = f"; refused at start when the app checks lengths: {refusal!r}" if refusal else ""
            print(f"tokens: {name} predictions, per-visitor cap {args.visitor_calls} calls: host paid "
                  f"{len(calls)} calls, {tokens:,} tokens ({tokens / max(1, len(calls)):,.0f} per call); "
                  f"run {outcome.status}: {outcome.message[:100]}{extra}")
        (c0, t0), (c1, t1) = results["ordinary"], results["padded"]
        print(f"tokens: padded / ordinary prompt tokens per call = "
              f"{(t1 / max(1, c1)) / (t0 / max(1, c0)):.0f}x; host tokens paid for the padded run = "
              f"{t1 / max(1, t0):.1f}x the ordinary run's")


def attack_xff(args) -> None:
    import gradio as gr  # noqa: F401  (the app's import, before the clock starts)
    from gradio_client import Client, handle_file

    from tests.fake_judge import FakeJudgeServer, free_port

    import app as app_mod

    with tempfile.TemporaryDirectory() as tmp, FakeJudgeServer() as srv:
        env = {"OPENAI_API_KEY": "sk-host", "OPENAI_BASE_URL": srv.url, "MMVET_DATA_DIR": tmp,
               "MMVET_BUDGET_PER_VISITOR": str(args.visitor_calls), "MMVET_BUDGET_GLOBAL": "0",
               "MMVET_MAX_RUNS_PER_VISITOR": "0"}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            settings = app_mod.AppSettings.from_env()
        finally:
            for k, v in old.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        demo = app_mod.build_demo(settings)
        demo.queue(**app_mod.queue_options())
        port = free_port()
        demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                    **app_mod.launch_options(settings))
        url = f"http://127.0.0.1:{port}/"
        try:
            run_ids = []
            for i in range(args.rotations):
                client = Client(url, headers={"X-Forwarded-For": f"203.0.113.{i + 1}"}, verbose=False)
                kwargs = dict(results=handle_file(str(RESULTS)), bench_c=app_mod.BENCH_BUNDLED, bench_f=None,
                              hub="", sub="All samples", n_runs=1, judge_c=app_mod.JUDGE_HOST, url="",
                              model="gpt-4-0613", key="", owner_tok=f"owner-{i}-" + "x" * 20)
                try:
                    out = client.predict(**kwargs, api_name="/grade")
                    run_ids.append(out["run_id"])
                except Exception as e:  # noqa: BLE001 — a refusal is a figure too
                    print(f"xff: request {i + 1} refused: {str(e)[:100]}")
                deadline = time.time() + 120
                while run_ids and demo.svc.jobs.is_running(run_ids[-1]) and time.time() < deadline:
                    time.sleep(0.1)
            paid = len(srv.state.completed_calls())
            print(f"xff: {args.rotations} requests from one client, each with a new X-Forwarded-For, per-visitor "
                  f"cap {args.visitor_calls} calls: the host paid {paid} judge calls "
                  f"({paid / args.visitor_calls:.1f}x the cap)")
        finally:
            demo.close()
            demo.svc.jobs.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="body,hang,drip,stop,tokens,xff")
    p.add_argument("--code", type=Path, default=ROOT, help="the checkout whose mmvet_core / app is measured")
    p.add_argument("--body-mb", type=int, default=1024)
    p.add_argument("--drip-every", type=float, default=20.0)
    p.add_argument("--timeout", type=float, default=None, help="judge timeout per attempt (default: the code's)")
    p.add_argument("--max-wait", type=float, default=900.0)
    p.add_argument("--visitor-calls", type=int, default=300)
    p.add_argument("--rotations", type=int, default=4)
    args = p.parse_args()
    args.code = args.code.resolve()
    _setup_path(args.code)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.chdir(args.code)
    sys.path.insert(1, str(ROOT))
    from mmvet_core.judging import judge as judge_mod

    print(f"code: {Path(judge_mod.__file__).parent.parent}")
    todo = [x.strip() for x in args.only.split(",") if x.strip()]
    runners = {"body": attack_body, "hang": lambda a: attack_hang_or_drip(a, "hang"),
               "drip": lambda a: attack_hang_or_drip(a, "drip"), "stop": attack_stop, "tokens": attack_tokens,
               "xff": attack_xff}
    threads = []
    for name in todo:        # the slow ones (hang, drip, stop) only wait: run them side by side
        t = threading.Thread(target=runners[name], args=(args,), name=name)
        t.start()
        if name in ("body", "tokens", "xff"):
            t.join()
        else:
            threads.append(t)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
