"""The frozen copy of a run that a board entry keeps (`make_snapshot`), and the identities it is ranked by.

Publishing freezes a copy of the run's per-sample scores (per judge run) and of its metadata (judge, judge kind,
benchmark and its sample ids, runs, totals, capabilities, integrations, date, provenance, the estimate's keys):
later overrides or the deletion of the run never change the board silently. The identities: the judge a rank group
is about (`judge_kind`, `judge_key`: the official ``gpt-4-0613`` and ``gpt-4`` are one judge), the benchmark
(`benchmark_label`), its very samples (`samples_sha`: ids, questions and answers) and a grade set
(`grades_digest`: the same grades whatever the number of judge runs that gave them).
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections.abc import Mapping

import numpy as np

from ..runs import provenance as prov
from ..scores.stats import score_intervals
from ..successors.equivalence import estimate_keys
from .fields import BoardError, visible_text

OFFICIAL_JUDGE_KEY = "gpt-4-0613"
#: The judge kinds of an entry (`judge_kind`).
KINDS = ("official", "successor", "baseline")


def judge_kind(judge: dict, metric_note: str | None) -> str:
    """``official`` (the official prompt with gpt-4-0613 / gpt-4: the MM-Vet metric), ``baseline`` (the offline
    keyword baseline) or ``successor`` (any other LLM judge or prompt)."""
    if judge.get("provider") == "baseline":
        return "baseline"
    return "official" if metric_note is None else "successor"


def judge_key(judge_name: str, kind: str) -> str:
    """The judge a rank group is about: the official judges are one (`rank_key` adds the kind, so a successor
    named ``gpt-4-0613`` — the official model with another prompt or overrides — is another group)."""
    return OFFICIAL_JUDGE_KEY if kind == "official" else ("baseline" if kind == "baseline" else judge_name)


def benchmark_label(version: str, subset: str | None, n: int) -> tuple[str, str]:
    """(filter key, label) of a benchmark: ``v1`` / ``MM-Vet v1``, ``v1-bard`` / ``MM-Vet v1 · Bard set``."""
    version = version or "?"
    if subset:
        sub = "bard" if subset in ("bard", "bardset") else re.sub(r"[^\w.-]+", "_", str(subset))[:40]
        return f"{version}-{sub}", f"MM-Vet {version} · {'Bard set' if sub == 'bard' else sub} ({n})"
    return version, f"MM-Vet {version}"


def samples_sha(samples: dict[str, dict]) -> str:
    """Identity of a benchmark's samples: ids, questions and answers (two uploads with the same ids but other
    questions are not the same samples)."""
    h = hashlib.sha256()
    for sid in sorted(samples):
        s = samples[sid]
        h.update(json.dumps([sid, s.get("question"), s.get("answer")], ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()[:16]


class ScoreTable(Mapping):
    """A checked entry's per-sample scores held as one read-only ``samples × runs`` array: the same mapping as
    the stored ``{sample id: [score per judge run]}`` (scores read back as floats), in a few kilobytes instead of
    a list and a float object per score. A server keeps every entry of its board decoded (`book.BoardBook`):
    5,000 entries of 218 samples held as dicts of lists were ≈ 1.1 million lists. Built by `compact_entry_parts`."""

    __slots__ = ("ids", "matrix", "_index")

    def __init__(self, ids: tuple[str, ...], matrix: np.ndarray, index: dict[str, int]):
        self.ids, self.matrix, self._index = ids, matrix, index

    def __getitem__(self, sid: str) -> list[float]:
        return self.matrix[self._index[sid]].tolist()

    def __contains__(self, sid: object) -> bool:
        return sid in self._index

    def __iter__(self):
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


#: Sample-id lists, capability maps and their indexes shared by the entries that have them equal (most entries of
#: a board are graded on the same benchmark), at most this many distinct ones.
_SHARED_MAX = 256
_shared: dict[tuple, object] = {}


def _share(key: tuple, make):
    """The shared value under `key`, made (``make()``) and kept when there is none yet."""
    got = _shared.get(key)
    if got is None:
        got = make()
        if len(_shared) < _SHARED_MAX:
            _shared[key] = got
    return got


def compact_entry_parts(meta: dict, scores: dict) -> tuple[dict, ScoreTable]:
    """(meta, scores) of a version checked against the schema (`schema.check_version`: its scores are exactly a
    ``len(sample_ids) × runs`` table of numbers), held compactly for a long-lived board: the scores as a
    `ScoreTable`, and the meta's sample ids and capability map shared with the other entries that have them equal
    (interned strings). The values read the same; nothing may mutate them."""
    ids = tuple(sys.intern(str(sid)) for sid in meta["sample_ids"])
    shared_ids = _share(("ids", ids), lambda: ids)
    index = _share(("index", shared_ids), lambda: {sid: i for i, sid in enumerate(shared_ids)})
    matrix = np.array([scores[sid] for sid in shared_ids], dtype=np.float64)
    matrix = matrix.reshape(len(shared_ids), int(meta["runs"]))
    matrix.setflags(write=False)
    meta = dict(meta)
    meta["sample_ids"] = _share(("id-list", shared_ids), lambda: list(shared_ids))
    caps = meta.get("sample_caps")
    if isinstance(caps, dict):
        items = tuple((sys.intern(str(k)), sys.intern(str(v))) for k, v in caps.items())
        meta["sample_caps"] = _share(("caps", items), lambda: dict(items))
    return meta, ScoreTable(shared_ids, matrix, index)


def sample_means(ids: list[str], scores: dict) -> np.ndarray:
    """Per-sample mean over the judge runs, in the order of `ids` (NaN where a sample has no score)."""
    if isinstance(scores, ScoreTable) and tuple(ids) == scores.ids and scores.matrix.shape[1] \
            and not np.isnan(scores.matrix).any():
        return scores.matrix.mean(axis=1)
    try:
        table = np.array([scores[sid] for sid in ids], dtype=np.float64)       # complete: the usual case
        if table.ndim == 2 and table.shape[1] and not np.isnan(table).any():
            return table.mean(axis=1)
    except (KeyError, TypeError, ValueError):
        pass
    out = np.full(len(ids), np.nan)
    for i, sid in enumerate(ids):
        vals = [float(v) for v in (scores.get(sid) or []) if v is not None]
        if vals:
            out[i] = sum(vals) / len(vals)
    return out


def grades_digest(ids: list[str], means: np.ndarray) -> str:
    """Identity of a grade set: its sample ids and per-sample means (to 1e-6). Two entries with the same digest
    have the same grades, whatever the number of judge runs that gave them."""
    h = hashlib.sha256(json.dumps(list(ids)).encode("utf-8"))
    h.update(np.round(np.nan_to_num(np.asarray(means, dtype=np.float64), nan=-1.0), 6).tobytes())
    return h.hexdigest()[:32]


def make_snapshot(view, *, tool_version: str = "", trusted=None) -> tuple[dict, dict[str, list[float | None]]]:
    """(meta, scores): the frozen copy of a finished run (`runs.RunView`) that a board entry keeps, with its
    provenance (`provenance.run_provenance`; `trusted`: the endpoints this server trusts, None for the host's
    CLI, which trusts its own runs).

    Raises `BoardError` when the run is not complete (a sample without a score in every run): a partial run
    would rank on other samples than its group. Overrides are part of the run's scores, as everywhere."""
    if not view.scores.complete:
        raise BoardError("Only a finished run (every sample graded in every run) can be published.")
    run, s = view.run, view.scores
    scores = view.effective_scores()
    kind = judge_kind(run.judge, view.metric_note)
    key, label = benchmark_label(view.benchmark.version, view.benchmark.subset_name, len(view.benchmark))
    ci = next((r for r in score_intervals(view.benchmark, scores) if r.kind == "total"), None)
    meta = {
        "model": visible_text(run.model_name),
        "judge": view.judge_name,
        "judge_text": view.judge_text,
        "judge_kind": kind,
        "judge_key": judge_key(view.judge_name, kind),
        "metric_note": view.metric_note,
        "benchmark": key,
        "benchmark_label": label,
        "benchmark_name": view.benchmark.name,
        "version": view.benchmark.version,
        "subset": view.benchmark.subset_name,
        "samples_sha": samples_sha(run.benchmark.get("samples") or {}),
        "sample_ids": list(view.benchmark.ids),
        "sample_caps": {sid: ",".join(smp.capabilities) for sid, smp in view.benchmark.samples.items()},
        "runs": run.n_runs,
        "total": s.total.mean,
        "total_std": s.total.std,
        "ci": [ci.low, ci.high] if ci else [None, None],
        "capabilities": {c.name: c.mean for c in s.capabilities},
        "integrations": {c.name: c.mean for c in s.integrations},
        "overrides": len(view.overrides),
        "date": time.strftime("%Y-%m-%d", time.gmtime(run.created_at)),
        "tool_version": tool_version,
        "provenance": prov.run_provenance(view, trusted=trusted),
    }
    meta["grades_sha"] = grades_digest(meta["sample_ids"], sample_means(meta["sample_ids"], scores))
    meta.update(estimate_keys(run, kind, trusted))
    return meta, scores
