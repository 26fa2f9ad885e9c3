"""Host-key budgets: per visitor per day and a global daily cap; own keys are never charged."""
import asyncio
import json
from pathlib import Path

import pytest

from mmvet_core.benchmark import load_bundled_v1
from mmvet_core.budget import BudgetLimits, HostBudget, visitor_id
from mmvet_core.grading import BudgetExceeded, grade_run
from mmvet_core.judge import JudgeSettings, make_judge
from mmvet_core.runs import create_run
from mmvet_core.store import Store

SHARED = Path(__file__).resolve().parent / "data"


def test_visitor_limit_then_global_limit(tmp_path):
    budget = HostBudget(Store(tmp_path / "g.db"), BudgetLimits(per_visitor_daily=3, global_daily=5))
    for _ in range(3):
        budget.charge("alice")
    with pytest.raises(BudgetExceeded, match="your own API key"):
        budget.charge("alice")
    budget.charge("bob")
    budget.charge("bob")
    with pytest.raises(BudgetExceeded, match="daily budget of 5"):
        budget.charge("carol")
    assert budget.remaining("carol") == (3, 0)


def test_zero_means_unlimited(tmp_path):
    budget = HostBudget(Store(tmp_path / "g.db"), BudgetLimits(per_visitor_daily=0, global_daily=0))
    for _ in range(50):
        budget.charge("alice")
    assert budget.remaining("alice") == (None, None)


def test_visitor_ids_are_salted_hashes():
    assert visitor_id("1.2.3.4", "s") != "1.2.3.4"
    assert visitor_id("1.2.3.4", "s") == visitor_id("1.2.3.4", "s") != visitor_id("1.2.3.4", "t")


def _small_run(store, bench, settings):
    preds = json.loads((SHARED / "results" / "llava-v1.5-13b.json").read_text())
    return create_run(store, benchmark=bench, spec="mmvet-v1", predictions={k: preds[k] for k in bench.ids},
                      n_runs=1, settings=settings, model_name="m")


def test_budget_stops_host_key_calls_and_own_key_continues(tmp_path, fake_judge):
    store = Store(tmp_path / "g.db")
    bench = load_bundled_v1().subset([f"v1_{i}" for i in range(30)], "first30")
    settings = JudgeSettings(base_url=fake_judge.url)
    budget = HostBudget(store, BudgetLimits(per_visitor_daily=10, global_daily=100))
    run_id = _small_run(store, bench, settings)

    async def go(hook):
        judge = make_judge(settings, "sk-host")
        try:
            return await grade_run(store, run_id, bench, judge, concurrency=1, budget=hook)
        finally:
            await judge.aclose()

    outcome = asyncio.run(go(budget.hook("visitor")))
    assert outcome.status == "stopped" and "own API key" in outcome.message
    assert len(fake_judge.state.completed_calls()) == 10        # not one call past the budget
    graded = outcome.graded
    assert 0 < graded <= 10
    outcome = asyncio.run(go(None))                              # the visitor's own key: no budget
    assert outcome.status == "done"
    assert store.count_grades(run_id)["ok"] + store.count_grades(run_id).get("fallback", 0) == 30
