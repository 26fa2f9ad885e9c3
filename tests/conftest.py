"""Shared fixtures: a running fake judge server (real HTTP on 127.0.0.1) and a store in ``tmp_path``."""
from __future__ import annotations

import pytest

from mmvet_core.store import Store
from tests.fake_judge import FakeJudgeServer


@pytest.fixture
def fake_judge():
    """A fresh `FakeJudgeServer` (no latency, no faults); ``fake_judge.state`` injects faults and logs calls."""
    with FakeJudgeServer() as server:
        yield server


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "grader.db")
    yield s
    s.close()
