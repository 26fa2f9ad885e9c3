"""Background jobs: they run without any UI, stop gracefully keeping paid answers, and resume without repeats."""
import json
import time
from pathlib import Path

from mmvet_core.benchmark import load_bundled_v1
from mmvet_core.jobs import JobManager
from mmvet_core.judge import JudgeSettings, make_judge
from mmvet_core.runs import create_run
from mmvet_core.store import Store

SHARED = Path(__file__).resolve().parent / "data"


def _run(store, fake_url, n_samples=40):
    bench = load_bundled_v1().subset([f"v1_{i}" for i in range(n_samples)], "first")
    preds = json.loads((SHARED / "results" / "llava-v1.5-7b.json").read_text())
    settings = JudgeSettings(base_url=fake_url)
    run_id = create_run(store, benchmark=bench, spec="mmvet-v1", predictions={k: preds[k] for k in bench.ids},
                        n_runs=1, settings=settings, model_name="m")
    return bench, settings, run_id


def test_stop_keeps_every_paid_answer_and_resume_makes_no_repeat_call(tmp_path, fake_judge):
    fake_judge.state.latency = 0.05
    store = Store(tmp_path / "g.db")
    jobs = JobManager(store)
    bench, settings, run_id = _run(store, fake_judge.url)
    assert jobs.start(run_id, bench, make_judge(settings, "sk-test"), concurrency=2)
    assert not jobs.start(run_id, bench, make_judge(settings, "sk-test"))      # already running
    while sum(store.count_grades(run_id).values()) < 5:
        time.sleep(0.02)
    assert jobs.stop(run_id)
    outcome = jobs.wait(run_id, timeout=10)
    assert outcome.status == "stopped"
    assert store.get_run(run_id).status == "stopped"
    answered = {(c["prompt"], c["temperature"]) for c in fake_judge.state.completed_calls()}
    assert store.cache_size() == len(fake_judge.state.completed_calls())   # every answer that arrived is stored
    graded_before = sum(store.count_grades(run_id).values())
    assert graded_before < 40

    fake_judge.state.latency = 0
    jobs.start(run_id, bench, make_judge(settings, "sk-test"), concurrency=4)
    assert jobs.wait(run_id, timeout=30).status == "done"
    later = fake_judge.state.completed_calls()[len(answered):]
    assert not answered & {(c["prompt"], c["temperature"]) for c in later}
    jobs.shutdown()


def test_a_failing_judge_run_does_not_block_a_healthy_one(tmp_path, fake_judge):
    from tests.fake_judge import FakeJudgeServer, FakeState

    store = Store(tmp_path / "g.db")
    jobs = JobManager(store)
    with FakeJudgeServer(FakeState(latency=0.5, fail_500=10_000, retry_after=0.01)) as bad:
        bench, s_bad, bad_id = _run(store, bad.url)
        _, s_good, good_id = _run(store, fake_judge.url)
        bad_settings = JudgeSettings(base_url=bad.url, max_retries=1)
        jobs.start(bad_id, bench, make_judge(bad_settings, "k"), concurrency=4)
        jobs.start(good_id, bench, make_judge(s_good, "k"), concurrency=4)
        assert jobs.wait(good_id, timeout=30).status == "done"
        assert jobs.is_running(bad_id)
        jobs.stop(bad_id)
        outcome = jobs.wait(bad_id, timeout=30)
        assert outcome.status == "stopped" and outcome.errored > 0
    jobs.shutdown()
