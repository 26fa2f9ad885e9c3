"""The service's front door (`mmvet_core.service`): one `GradingService` composes the facets over one store and one
job manager, and every method name of the service before its split still answers, from the facet that has it.
Each facet has its own test module: test_service_runs, _reading, _inputs, _judges, _limits (the leaderboard's
rules: test_leaderboard)."""
from __future__ import annotations

import inspect

import pytest

from mmvet_core.service import (MOVED, BENCH_BUNDLED, JUDGE_BASELINE, Board, BenchmarkChoice, GradingService,
                                HostLimits, Inputs, JudgeChoice, Judges, RunReading, Runs, ServiceSettings)
from tests.service_helpers import RESULTS, wait_done


@pytest.fixture
def svc(tmp_path):
    s = GradingService(ServiceSettings(data_dir=tmp_path / "data"))
    yield s
    s.jobs.shutdown()
    s.store.close()


def test_the_facets_share_one_store_and_one_job_manager(svc):
    facets = {"runs": Runs, "reading": RunReading, "judges": Judges, "inputs": Inputs, "board": Board,
              "limits": HostLimits}
    for name, cls in facets.items():
        facet = getattr(svc, name)
        assert isinstance(facet, cls)
        assert getattr(facet, "store", svc.store) is svc.store and getattr(facet, "jobs", svc.jobs) is svc.jobs


@pytest.mark.parametrize("name", sorted(MOVED))
def test_an_old_method_name_answers_from_its_facet(svc, name):
    """``svc.start`` is ``svc.runs.start``: callers written before the split keep working."""
    facet = getattr(svc, MOVED[name])
    assert getattr(svc, name) == getattr(facet, name)
    if inspect.ismethod(getattr(facet, name)):
        assert getattr(facet, name).__doc__ == getattr(svc, name).__doc__


def test_an_unknown_name_is_an_attribute_error(svc):
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        svc.nope
    assert not hasattr(svc, "_read_cache")          # private state stays inside its facet


def test_a_run_through_the_old_names_is_the_same_run_through_the_facets(svc):
    run_id, started = svc.start(str(RESULTS), BenchmarkChoice(BENCH_BUNDLED), 1, JudgeChoice(JUDGE_BASELINE),
                                owner="me", visitor="v")
    assert started and wait_done(svc, run_id)["status"] == "done"
    assert svc.status(run_id) == svc.reading.status(run_id) and svc.runs_of("me") == svc.reading.runs_of("me")
