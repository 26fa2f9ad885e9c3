"""The service's front door (`mmvet_core.service`): one `GradingService` composes the facets over one store and one
job manager, and every method name of the service before its split still answers (for outside scripts), from the
facet that has it, with a warning that names the new spelling.
Each facet has its own test module: test_service_runs, _reading, _inputs, _judges, _limits (the leaderboard's
rules: test_leaderboard)."""
from __future__ import annotations

import inspect

import pytest

from mmvet_core.service import (MOVED, Board, GradingService, HostLimits, Inputs, Judges, RunReading, Runs,
                                ServiceSettings)


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
def test_an_old_method_name_answers_from_its_facet_with_a_deprecation_warning(svc, name):
    """``svc.start`` is ``svc.runs.start``, and says so: a script written before the split keeps working."""
    facet = getattr(svc, MOVED[name])
    new = rf"svc\.{MOVED[name]}\.{name}"
    with pytest.warns(DeprecationWarning, match=rf"^GradingService\.{name} is deprecated: use {new}$"):
        old = getattr(svc, name)
    assert old == getattr(facet, name)
    if inspect.ismethod(old):
        assert old.__doc__ == getattr(facet, name).__doc__


def test_an_unknown_name_is_an_attribute_error(svc):
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        svc.nope
    assert not hasattr(svc, "_read_cache")          # private state stays inside its facet
