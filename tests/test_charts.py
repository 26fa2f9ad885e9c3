"""Radar figures and the paper's published scores as chart series."""
from __future__ import annotations

import json
from pathlib import Path

import plotly.graph_objects as go
import pytest

from mmvet_core.scores.aggregate import aggregate_scores
from mmvet_core.inputs.benchmark import CAPABILITY_LABELS, load_bundled_v1
from mmvet_core.scores.charts import load_paper_scores, make_radar, paper_model_names, paper_series, scores_series

SHARED_DATA = Path(__file__).resolve().parent / "data"
CAPS = ["rec", "ocr", "know", "gen", "spat", "math"]


@pytest.fixture(scope="module")
def v1():
    return load_bundled_v1()


def test_radar_with_six_capability_axes():
    series = paper_series(["LLaVA-13B (LLaMA-2)", "MM-ReAct-GPT-4"], "capabilities")
    fig = make_radar(series, CAPS, "Capabilities", labels=CAPABILITY_LABELS)

    assert isinstance(fig, go.Figure)
    assert [t.name for t in fig.data] == ["LLaVA-13B (LLaMA-2)", "MM-ReAct-GPT-4"]
    first, overlay = fig.data
    assert first.fill == "toself" and overlay.fill == "none"
    assert list(first.theta) == [CAPABILITY_LABELS[c] for c in CAPS] + ["Recognition"]   # closed polygon
    assert list(first.r) == [39.2, 22.7, 26.5, 29.3, 29.6, 7.7, 39.2]                       # Table 2
    assert tuple(fig.layout.polar.radialaxis.range) == (0, 100)
    assert fig.layout.title.text == "Capabilities"
    json.loads(fig.to_json())                   # serialisable, as Gradio needs


def test_radar_with_sixteen_integration_axes(v1):
    axes = v1.integrations
    assert len(axes) == 16
    fig = make_radar(paper_series(paper_model_names()[:3], "integrations"), axes, "Integrations")
    assert len(fig.data) == 3
    assert all(len(t.r) == 17 and len(t.theta) == 17 for t in fig.data)
    # the paper's way of writing them, not raw codes
    assert fig.data[0].theta[0] == "Rec+Know+Gen" and "OCR+Spat+Math" in fig.data[0].theta


def test_radar_fills_its_card_and_keeps_ticks_off_the_first_axis(v1):
    """Issue 10, item 8. Before: the polar area used ~200 px of a 380 px card and the 0-100 ticks ran across the
    Rec axis (the first one, drawn at 0 degrees like the radial axis)."""
    for axes in (list(v1.capabilities), list(v1.integrations)):
        fig = make_radar([("run", {a: 40.0 for a in axes})], axes, "t")
        polar, n = fig.layout.polar, len(axes)
        assert fig.layout.height >= 400 and fig.layout.margin.t <= 40 and fig.layout.margin.b <= 10
        assert polar.domain.y[1] - polar.domain.y[0] >= 0.8
        # the first axis is drawn at the top (rotation 90, clockwise), the radial ticks half a step from it
        assert polar.angularaxis.rotation == 90 and polar.angularaxis.direction == "clockwise"
        first, second = 90, 90 - 360 / n
        assert polar.radialaxis.angle == pytest.approx((first + second) / 2)
        assert list(polar.radialaxis.tickvals) == [25, 50, 75, 100] and polar.radialaxis.tickfont.size <= 9
        assert polar.radialaxis.showticklabels == (n <= 8)      # 16 axes leave no room for them


def test_missing_values_are_drawn_at_zero_and_say_not_graded():
    fig = make_radar([("run", {"rec": 50.0, "ocr": None})], ["rec", "ocr", "know"], "Partial")
    trace = fig.data[0]
    assert list(trace.r) == [50.0, 0.0, 0.0, 50.0]
    assert list(trace.text) == ["50.0", "not graded", "not graded", "50.0"]
    assert "%{text}" in trace.hovertemplate


def test_custom_missing_text():
    fig = make_radar([("Bard", {"ocr": None})], ["ocr"], "t", missing_text="no sample")
    assert fig.data[0].text[0] == "no sample"


def test_radar_needs_axes():
    with pytest.raises(ValueError):
        make_radar([], [], "empty")


def test_radar_from_our_scores_over_paper_overlay(v1):
    grades = json.loads((SHARED_DATA / "official-grades" / "llava-v1.5-13b_gpt-4-grade-3runs.json").read_text())
    scores = aggregate_scores(v1, {k: g["score"] for k, g in grades.items()})
    ours = scores_series("llava-v1.5-13b", scores, "capabilities")
    assert ours == ("llava-v1.5-13b", {"rec": 40.5, "ocr": 28.4, "know": 23.5, "gen": 24.2, "spat": 35.2,
                                       "math": 8.8})
    fig = make_radar([ours, *paper_series(["LLaVA-13B (LLaMA-2)"], "capabilities")], CAPS, "vs paper")
    assert [t.fill for t in fig.data] == ["toself", "none"]
    with pytest.raises(ValueError):
        scores_series("x", scores, "total")


def test_paper_scores_full_set():
    paper = load_paper_scores()
    assert len(paper) == 16 + 3           # Table 2's 16 rows plus Table 5's GPT-4V rows
    llava = paper["LLaVA-13B (LLaMA-2)"]
    assert llava["capabilities"] == {"rec": 39.2, "ocr": 22.7, "know": 26.5, "gen": 29.3, "spat": 29.6,
                                     "math": 7.7}
    assert len(llava["integrations"]) == 16
    assert (llava["total"], llava["total_std"]) == (32.9, 0.1)
    assert paper["GPT-4V"]["total"] == 67.7
    assert paper_model_names()[0] == "Transformers Agent (GPT-4)"


def test_paper_scores_match_the_shared_copy():
    assert load_paper_scores(SHARED_DATA / "paper-scores.json") == load_paper_scores()


def test_paper_scores_bard_set_merges_table10_names():
    bard = load_paper_scores(subset="bard")
    assert list(bard) == ["LLaVA-13B (LLaMA-2)", "LLaVA-13B (V1.3, 336px)", "MM-ReAct-GPT-3.5",
                          "MM-ReAct-GPT-4", "Bard"]
    assert all(len(m["capabilities"]) == 6 and len(m["integrations"]) == 16 for m in bard.values())
    assert bard["Bard"]["integrations"]["rec_ocr_spat_math"] is None     # no such sample in the Bard set
    assert bard["Bard"]["total"] == 53.5
    assert paper_model_names("bard") == list(bard)


def test_paper_series_errors():
    with pytest.raises(ValueError, match="kind"):
        paper_series(["Bard"], "totals", subset="bard")
    with pytest.raises(ValueError, match="no paper scores for Nobody"):
        paper_series(["Nobody"], "capabilities")
    with pytest.raises(ValueError, match="full set and the Bard set"):
        paper_model_names("v2")


def test_user_text_in_trace_names_and_axes_cannot_become_plotly_html():
    # regression: plotly renders <a href>, <b>, <br> in names; a results file name is user input
    fig = make_radar([("<a href='javascript:alert(1)'>x</a>", {"rec": 10.0})], ["rec"], "t",
                     labels={"rec": "<b>rec</b>"})
    trace = fig.data[0]
    assert "<" not in trace.name and ">" not in trace.name
    assert all("<" not in t for t in trace.theta)


def test_the_first_series_hover_carries_the_official_equivalent_estimate_where_given():
    notes = {"rec": "official-equivalent estimate: 31.0 [25.1, 37.2] (an estimate, not the official MM-Vet metric)",
             "ocr": "<b>x</b>"}
    fig = make_radar([("run", {c: 40.0 for c in CAPS}), ("paper", {c: 30.0 for c in CAPS})], CAPS, "t", notes=notes)
    first, other = fig.data
    assert first.text[0] == "40.0<br>" + notes["rec"] and first.text[2] == "40.0"
    assert first.text[1] == "40.0<br>‹b›x‹/b›"            # a note is inert text
    assert list(other.text) == ["30.0"] * 7
