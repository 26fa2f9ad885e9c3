"""Official-equivalent estimate (mmvet_core/equivalence.py): hand-computed intervals, the cases with no estimate,
the export file."""
import pytest

from mmvet_core.equivalence import (Equivalence, combine_interval, estimate_equivalent, format_equivalent_line,
                                    hover_text, make_equivalent_csv_text, unavailable_reason)
from mmvet_core.judgecheck import CheckColumn, JudgeCheckResult
from mmvet_core.stats import IntervalRow


@pytest.mark.parametrize("args, expected", [
    ((40.0, 37.0, 43.0, 7.0, 3.0, 11.0), (33.0, 28.0, 38.0)),      # √(3² + 4²) = 5 on each side
    ((40.0, 36.0, 43.0, 7.0, 7.0, 7.0), (33.0, 29.0, 36.0)),       # a shift known exactly adds nothing
    ((40.0, 40.0, 40.0, 7.0, 1.0, 15.0), (33.0, 25.0, 39.0)),      # low uses the shift's high side, and back
    ((40.0, None, None, -2.0, None, None), (42.0, 42.0, 42.0)),
], ids=["3-4-5", "exact-shift", "asymmetric-shift", "no-bounds"])
def test_the_interval_adds_both_uncertainties_side_by_side(args, expected):
    assert combine_interval(*args) == pytest.approx(expected)


def _check(correctable=True, note="a constant shift"):
    cols = [CheckColumn("total", 436, 0.07, 0.01, 0.12, 7.5, {}, [7.0, 8.0], {}),
            CheckColumn("rec", 300, 0.07, 0.01, 0.13, 7.0, {}, [6.0, 8.0], {})]
    return JudgeCheckResult(judge={"model": "judge-b"}, models=["a", "b"], n_graded=436, n_expected=436,
                            columns=cols, scores={}, verdict="", close=False, correctable=correctable,
                            correction_note=note, created_at=5.0)


ROWS = [IntervalRow("total", "total", 218, 38.9, 33.8, 44.1), IntervalRow("capability", "rec", 150, 43.9, 37.7, 50.5),
        IntervalRow("capability", "math", 26, 16.9, 10.0, 28.0),      # not in the check: no estimate for it
        IntervalRow("integration", "rec", 10, 75.7, 62.1, 88.2)]
RUN = {"model": "judge-b", "provider": "openai", "prompt_examples": None}


def test_the_estimate_is_the_score_minus_the_shift_for_each_checked_column():
    eq = estimate_equivalent(ROWS, _check(), run_judge=RUN)
    assert eq.available and [c.name for c in eq.columns] == ["total", "rec"]
    t = eq.total
    assert t.estimate == pytest.approx(31.4)
    assert t.low == pytest.approx(31.4 - (5.1 ** 2 + 0.5 ** 2) ** 0.5)
    assert t.high == pytest.approx(31.4 + (5.2 ** 2 + 0.5 ** 2) ** 0.5)
    line = format_equivalent_line(eq)
    assert line.startswith("official-equivalent estimate: 31.4 [26.3, 36.6]")
    assert "not the official MM-Vet metric" in line and "+7.5 [+7.0, +8.0]" in line
    assert "estimate" in hover_text(eq, "rec") and hover_text(eq, "math") == ""
    text = make_equivalent_csv_text(eq)
    assert text.splitlines()[1].startswith("total,38.9,33.8,44.1,+7.5,+7.0,+8.0,31.4,26.3,36.6,")
    assert "not the official MM-Vet metric" in text


@pytest.mark.parametrize("judge, version, check, says", [
    ({"provider": "imported", "model": "gpt-4"}, "v1", None, "imported"),
    ({"provider": "openai", "model": "gpt-4-0613", "prompt_examples": None}, "v1", None, "official judge itself"),
    ({"provider": "openai", "model": "judge-b", "prompt_examples": [1, 2]}, "v1", "ok", "another prompt"),
    ({"provider": "openai", "model": "judge-b", "prompt_examples": None}, "v2", "ok", "measures MM-Vet v1"),
    ({"provider": "openai", "model": "judge-b", "prompt_examples": None}, "v1", None, "judge-check --judge-model judge-b"),
    ({"provider": "openai", "model": "judge-b", "prompt_examples": None}, "v1", "refused", "depends on the level"),
], ids=["imported", "official-judge", "other-prompt", "v2", "no-check", "check-refuses"])
def test_no_estimate_and_why(judge, version, check, says):
    stored = {"ok": _check(), "refused": _check(False, "the shift depends on the level"), None: None}[check]
    assert says in unavailable_reason(judge, version, stored)
    eq = estimate_equivalent(ROWS, stored, run_judge=judge, benchmark_version=version)
    assert not eq.available and eq.columns == []
    assert format_equivalent_line(eq).startswith("official-equivalent estimate: none (")
    assert "no official-equivalent estimate" in make_equivalent_csv_text(eq)


def test_nothing_graded_has_no_estimate():
    eq = estimate_equivalent([], _check(), run_judge=RUN)
    assert eq == Equivalence(False, "nothing graded yet", "judge-b")
