"""Plotly figures (pure: data in, figure out; no Gradio) and the paper's published scores as chart series.

The paper's scores live in ``assets/paper-scores.json`` (Tables 2-5 for the full set, 9-10 for the Bard set,
transcribed from the MM-Vet paper, Yu et al., ICML 2024).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

import plotly.graph_objects as go

from mmvet_core.scores.aggregate import Scores
from mmvet_core.inputs.benchmark import ASSETS_DIR, axis_label

PAPER_SCORES_PATH = ASSETS_DIR / "paper-scores.json"
RADAR_HEIGHT = 420
KINDS: tuple[str, ...] = ("capabilities", "integrations")

#: Which tables of paper-scores.json hold which subset (full set first so its model order wins).
_SUBSET_TABLES: dict[str, tuple[str, ...]] = {
    "all": ("table2_capabilities_full", "table5_capabilities_gpt4v",
            "table3_integrations_full", "table4_integrations_gpt4v"),
    "bard": ("table9_capabilities_bard_set", "table10_integrations_bard_set"),
}
# Table 10 calls the two LLaVA rows "Vicuna-13B (...)" where Table 9 says "LLaVA-13B (...)": a naming slip in
# the paper (see the notes in paper-scores.json), so both tables' rows are merged under Table 9's names.
_ROW_ALIASES: dict[str, str] = {"Vicuna-13B (LLaMA-2)": "LLaVA-13B (LLaMA-2)",
                                "Vicuna-13B (V1.3, 336px)": "LLaVA-13B (V1.3, 336px)"}


def _plain(text: str) -> str:
    """Plotly renders a subset of HTML (links included) in names and labels: keep user text inert."""
    return str(text).replace("<", "‹").replace(">", "›")


#: Legend names longer than this wrap onto more lines (a legend line is never cut at the figure's edge).
LEGEND_WRAP = 44
_LEGEND_LINE_PX = 15


def legend_name(name: str, width: int = LEGEND_WRAP) -> str:
    """A trace name for the legend: inert (see `_plain`) and wrapped at spaces into lines of at most `width`
    characters with ``<br>`` (a single longer word is cut into pieces).

    >>> legend_name("llava-v1.5-13b (this run, owner's corrected score with 2 human overrides)", 30)
    "llava-v1.5-13b (this run,<br>owner's corrected score with 2<br>human overrides)"
    """
    lines: list[str] = []
    for word in _plain(name).split():
        while len(word) > width:
            lines.append(word[:width])
            word = word[width:]
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def _fmt(value: float | None, missing_text: str) -> str:
    return missing_text if value is None else f"{value:.1f}"


def make_radar(series: list[tuple[str, Mapping[str, float | None]]], axes: list[str], title: str, *,
               labels: Mapping[str, str] | None = None, missing_text: str = "not graded",
               notes: Mapping[str, str] | None = None) -> go.Figure:
    """A radar chart with one `go.Scatterpolar` trace per ``(name, {axis: value})`` in `series`.

    The first series is filled (``fill="toself"``), the others are drawn as lines over it. Axes appear in the
    order of `axes`, shown through `labels` (axis -> display label; default: the paper's short names, integrations
    as ``Rec+OCR``). The radial axis spans 0-100; its ticks sit between two axes (not across the first one).
    A missing or ``None`` value is drawn at 0 and its hover says `missing_text`. The polygon is closed by
    repeating the first axis. `notes` (axis -> text) adds a line to the first series' hover on those axes (the
    official-equivalent estimate). Raises `ValueError` when `axes` is empty.
    """
    if not axes:
        raise ValueError("a radar chart needs at least one axis")
    labels = labels or {}
    theta = [_plain(labels.get(a, axis_label(a))) for a in axes]
    theta_closed = theta + theta[:1]
    fig = go.Figure()
    for index, (name, values) in enumerate(series):
        raw = [values.get(a) for a in axes]
        r = [0.0 if v is None else float(v) for v in raw]
        text = [_fmt(v, missing_text) for v in raw]
        if index == 0 and notes:
            text = [t + (f"<br>{_plain(notes[a])}" if notes.get(a) else "") for t, a in zip(text, axes)]
        fig.add_trace(go.Scatterpolar(
            r=r + r[:1],
            theta=theta_closed,
            text=text + text[:1],
            name=legend_name(name),
            fill="toself" if index == 0 else "none",
            mode="lines+markers" if index == 0 else "lines",
            opacity=0.85 if index == 0 else 1.0,
            hovertemplate="%{theta}: %{text}<extra>%{fullData.name}</extra>",
        ))
    many = len(axes) > 8
    # the legend sits under the polar area: every line beyond two makes the figure taller (the polar area keeps
    # its size), so no legend line is cut at the bottom edge
    extra = _LEGEND_LINE_PX * max(0, sum(legend_name(n).count("<br>") + 1 for n, _ in series) - 2)
    height = RADAR_HEIGHT + extra
    bottom = (0.12 * RADAR_HEIGHT + extra) / height
    fig.update_layout(
        title={"text": title, "font": {"size": 14}, "x": 0.01, "y": 0.98},
        height=height,
        autosize=True,
        polar={"radialaxis": {"range": [0, 100], "visible": True, "tickvals": [25, 50, 75, 100],
                              "showticklabels": not many,     # 16 axes: no room between them (values: hover)
                              "tickfont": {"size": 8, "color": "#888"},
                              # between the first two axes (the polygon starts on the first one)
                              "angle": 90 - 180 / len(axes), "tickangle": 90 - 180 / len(axes)},
               "angularaxis": {"tickfont": {"size": 9 if many else 11}, "rotation": 90, "direction": "clockwise"},
               "domain": {"x": [0, 1], "y": [bottom, 1 - 0.06 * RADAR_HEIGHT / height]}},
        showlegend=True,
        legend={"orientation": "h", "yanchor": "top", "y": bottom - 0.04 * RADAR_HEIGHT / height, "x": 0,
                "font": {"size": 10}},
        margin={"l": 85 if many else 45, "r": 85 if many else 45, "t": 36, "b": 8},
    )
    return fig


def scores_series(name: str, scores: Scores, kind: str) -> tuple[str, dict[str, float | None]]:
    """One `make_radar` series from aggregated `scores`: ``(name, {column: rounded mean or None})``.

    `kind` is ``"capabilities"`` or ``"integrations"``; raises `ValueError` otherwise.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return name, {column.name: column.mean for column in getattr(scores, kind)}


def _subset_key(subset: str | None) -> str:
    if subset in (None, "", "all", "full"):
        return "all"
    if subset.lower() in ("bard", "bardset", "bard_set"):
        return "bard"
    raise ValueError(f"the paper reports the full set and the Bard set only, not {subset!r}")


def load_paper_scores(path: str | Path = PAPER_SCORES_PATH, subset: str | None = None) -> dict[str, dict]:
    """The paper's published scores for `subset` (``None`` = all 218 samples, ``"bard"`` = the Bard set).

    Returns model -> ``{"capabilities": {code: score}, "integrations": {canonical name: score | None},
    "total": float, "total_std": float}`` in the paper's row order; the capability and integration tables of a
    subset are merged per model (a model only in one table lacks the other key's entries: an empty dict).
    Raises `ValueError` for an unknown subset and `OSError` / `json.JSONDecodeError` for an unreadable file.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    models: dict[str, dict] = {}
    for table_name in _SUBSET_TABLES[_subset_key(subset)]:
        table = data["tables"].get(table_name)
        if table is None:
            continue
        for row in table["rows"]:
            name = _ROW_ALIASES.get(row["model"], row["model"])
            entry = models.setdefault(name, {"capabilities": {}, "integrations": {}, "total": row.get("total"),
                                             "total_std": row.get("total_std")})
            for kind in KINDS:
                for key, value in (row.get(kind) or {}).items():
                    entry[kind].setdefault(key, value)
    return models


def paper_model_names(subset: str | None = None) -> list[str]:
    """Models the paper reports for `subset`, in table order."""
    return list(load_paper_scores(subset=subset))


def paper_series(models: list[str], kind: str, subset: str | None = None) -> list[tuple[str, dict]]:
    """``[(model, {axis: score})]`` for `make_radar`, from the paper's tables.

    `kind` is ``"capabilities"`` or ``"integrations"``. Raises `ValueError` for an unknown kind or model (the
    message lists the known models).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    scores = load_paper_scores(subset=subset)
    unknown = [m for m in models if m not in scores]
    if unknown:
        raise ValueError(f"no paper scores for {', '.join(unknown)}; known: {', '.join(scores)}")
    return [(m, dict(scores[m][kind])) for m in models]


def make_scatter(ids: list[str], a: list[float], b: list[float], name_a: str, name_b: str,
                 title: str = "Per-sample scores") -> go.Figure:
    """Per-sample scores of B against A (one point per sample, jittered a little so that equal scores stay
    visible; the hover gives the exact scores) with the diagonal of perfect agreement."""
    import random

    rng = random.Random(0)                     # the same jitter every time
    jx = [x + rng.uniform(-0.015, 0.015) for x in a]
    jy = [y + rng.uniform(-0.015, 0.015) for y in b]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="agreement", line={"dash": "dot"},
                             hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=jx, y=jy, mode="markers", name=_plain(f"{name_b} vs {name_a}"),
                             text=[_plain(i) for i in ids], customdata=list(zip(a, b)), marker={"size": 6,
                                                                                                 "opacity": 0.6},
                             hovertemplate="%{text}: A %{customdata[0]:.2f}, B %{customdata[1]:.2f}<extra></extra>"))
    fig.update_layout(title=title, xaxis={"title": _plain(f"A: {name_a}"), "range": [-0.05, 1.05]},
                      yaxis={"title": _plain(f"B: {name_b}"), "range": [-0.05, 1.05]},
                      showlegend=False, margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


def make_compare_figures(cmp, pair: int = 0) -> tuple[go.Figure, go.Figure]:
    """The Compare view's two figures for a `compare.Comparison`: per-sample scatter of set ``pair + 1`` against
    the reference, and the capability radars of every set overlaid."""
    ref, other = cmp.sets[0].name, cmp.sets[pair + 1].name
    a = [row[ref] for row in cmp.sample_scores]
    b = [row[other] for row in cmp.sample_scores]
    scatter = make_scatter(cmp.ids, a, b, ref, other, title=f"Per-sample scores ({cmp.n_common} samples)")
    caps = [c.name for c in cmp.columns if c.kind == "capability"]
    series = [(s.name, {c.name: v.score for c, v in zip(cmp.columns, s.columns) if c.kind == "capability"})
              for s in cmp.sets]
    radar = make_radar(series, caps, "Capabilities (common samples)")
    return scatter, radar


def make_check_lomo(result) -> go.Figure | None:
    """The judge check's leave-one-model-out plot (`judgecheck.JudgeCheckResult`): each reference model's official
    total (x) against the total its per-grade correction, fit on the other references, predicts (y); the diagonal
    is a perfect prediction. None when the check has no such table."""
    lomo = result.lomo_table() if result is not None else None
    if lomo is None or not lomo.rows:
        return None
    xs = [r.official_total for r in lomo.rows]
    ys = [r.predicted[0] for r in lomo.rows]
    lo, hi = min(xs + ys) - 5, max(xs + ys) + 5
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="perfect", line={"dash": "dot"},
                             hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers+text", text=[_plain(r.model) for r in lomo.rows],
                             textposition="top center", marker={"size": 9}, name="references",
                             customdata=[r.error[0] for r in lomo.rows],
                             hovertemplate="%{text}: official %{x:.1f}, predicted %{y:.1f} "
                                           "(error %{customdata:+.1f})<extra></extra>"))
    fig.update_layout(title="Official total vs leave-one-model-out prediction",
                      xaxis={"title": "official total (gpt-4-0613)", "range": [lo, hi]},
                      yaxis={"title": "predicted from the other references", "range": [lo, hi]},
                      showlegend=False, height=360, margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


def make_check_shifts(result) -> go.Figure:
    """The judge check's shift per column (total and each capability): candidate − official score in points,
    pooled over the reference models, with its 95 % paired bootstrap interval; 0 is no shift."""
    cols = [c for c in result.columns if c.shift == c.shift]          # (NaN: a column without samples)
    names = [c.name for c in cols]
    shifts = [c.shift for c in cols]
    ivs = [c.shift_interval or [c.shift, c.shift] for c in cols]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=shifts, y=names, mode="markers", marker={"size": 10}, name="shift",
                             error_x={"type": "data", "symmetric": False,
                                      "array": [hi - s for s, (_, hi) in zip(shifts, ivs)],
                                      "arrayminus": [s - lo for s, (lo, _) in zip(shifts, ivs)]},
                             customdata=ivs,
                             hovertemplate="%{y}: %{x:+.1f} [%{customdata[0]:+.1f}, %{customdata[1]:+.1f}] points"
                                           "<extra></extra>"))
    fig.add_vline(x=0, line_dash="dot")
    fig.update_layout(title="Shift per column (candidate − official, 95 % interval)",
                      xaxis={"title": "points", "zeroline": False},
                      yaxis={"autorange": "reversed", "type": "category"},
                      showlegend=False, height=360, margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig
