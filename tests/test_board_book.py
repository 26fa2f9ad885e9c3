"""Ranks that scale (`mmvet_core.board.ranks`, `mmvet_core.board.book`): incremental ranks equal a full build,
identical grades count once, and a reader never waits for a recompute (issue 26, attack 4). Entries are written
straight into a real store (their frozen copies built by hand, totals recomputed from their scores)."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from mmvet_core.board import book as board_book
from mmvet_core.board.entries import RANKING_NOTE, owner_hash, rank_bounds
from mmvet_core.board.ranks import GroupRanks, better_matrix, bounds_from
from mmvet_core.board.schema import check_version, recompute_totals
from mmvet_core.store import Store

GRADES = Path(__file__).resolve().parents[1] / "assets" / "reference" / "llava-v1.5-13b_gpt-4-grade-3runs.json"
KW = dict(resamples=400, seed=0, level=0.95)


def table(seed: int, m: int, n: int = 60) -> np.ndarray:
    rng = np.random.default_rng(seed)
    level = rng.random(n)[None, :]
    return np.clip(np.round(level * rng.uniform(0.2, 1.6, (m, 1)) + rng.normal(0, 0.3, (m, n)), 1), 0, 1)


def test_incremental_adds_and_removals_equal_a_full_build():
    scores = table(0, 50)
    keys = [f"k{i}" for i in range(50)]
    vectors = dict(zip(keys, scores))
    g = GroupRanks(60, **KW).build({k: vectors[k] for k in keys[:30]}, {k: 1 for k in keys[:30]})
    final = [k for k in keys if k not in ("k3", "k17", "k29")]
    mult = {k: (3 if k == "k40" else 1) for k in final}            # k40: three entries with the same grades
    for i in range(30, 50):                                         # one entry at a time, as publishes arrive
        present = [k for k in keys[: i + 1] if k in final or k in keys[:30]]
        assert g.sync({k: vectors[k] for k in present}, {k: mult.get(k, 1) for k in present}, max_adds=1)
    assert g.sync({k: vectors[k] for k in final}, mult, max_adds=1)
    full = GroupRanks(60, **KW).build({k: vectors[k] for k in final}, mult)
    assert g.bounds() == full.bounds() and g.size == full.size == 49
    plain = rank_bounds(np.vstack([vectors[k] for k in final] + [vectors["k40"]] * 2), **KW)
    assert full.bounds()["k40"] == plain[final.index("k40")] == plain[-1]


def test_many_new_grade_sets_wait_for_the_background_and_the_others_stay_ranked():
    old = dict(zip("abc", table(1, 3)))
    g = GroupRanks(60, **KW).build(old, {k: 1 for k in old})
    many = {**{k: v for k, v in old.items() if k != "c"}, **{f"k{i}": v for i, v in enumerate(table(2, 10))}}
    mult = {k: 1 for k in many}
    assert not g.sync(many, mult, max_adds=5)
    assert g.keys == ["a", "b"] and g.bounds() == GroupRanks(60, **KW).build({k: old[k] for k in "ab"},
                                                                           {"a": 1, "b": 1}).bounds()
    extended = g.extended(many, mult)                      # what the background thread does
    assert extended.bounds() == GroupRanks(60, **KW).build(many, mult).bounds() and g.keys == ["a", "b"]


def test_the_covariance_shortcut_prunes_like_the_draws():
    scores = table(3, 40)
    _, pruned = better_matrix(scores, prune=True, **KW)
    _, counted = better_matrix(scores, prune=False, **KW)
    assert (pruned == counted).all() and bounds_from(pruned) == bounds_from(counted)


# --- the book over a real store ------------------------------------------------------------------------------------
def template() -> tuple[dict, list[str]]:
    from mmvet_core.inputs.benchmark import load_bundled_v1

    bench = load_bundled_v1()
    ids = list(bench.ids)
    meta = {"model": "m", "judge": "gpt-4-0613", "judge_kind": "official", "judge_key": "gpt-4-0613",
            "metric_note": None, "benchmark": "v1", "benchmark_label": "MM-Vet v1", "samples_sha": "0123456789abcdef",
            "sample_ids": ids, "sample_caps": {sid: ",".join(s.capabilities) for sid, s in bench.samples.items()},
            "runs": 1, "total": 0.0, "ci": [None, None], "capabilities": {}, "integrations": {},
            "date": "2026-12-04", "provenance": {"source": "graded", "judge": "gpt-4-0613",
                                                 "endpoints": ["api.openai.com"], "verified_by": "server"}}
    return meta, ids


def add_entries(store: Store, n: int, *, distinct: bool, seed: int = 0) -> list[str]:
    meta, ids = template()
    rng = np.random.default_rng(seed)
    out = []
    base = {sid: [float(v)] for sid, v in zip(ids, np.round(rng.random(len(ids)), 1))}
    for i in range(n):
        scores = {sid: [float(v)] for sid, v in zip(ids, np.round(np.clip(rng.normal(rng.uniform(0.2, 0.7), 0.3,
                                                                                   len(ids)), 0, 1), 1))} \
            if distinct else base
        m = recompute_totals(meta, scores)
        check_version(m, scores)
        eid = f"e{seed}x{i:04d}"
        store.add_board_version(eid, run_id=f"r{i}", owner_hash=owner_hash(f"o{i}"), name=f"model {seed}-{i}",
                                link="", meta=m, scores=scores)
        out.append(eid)
    return out


def test_copies_of_one_run_rank_together_and_one_unpublish_is_incremental(tmp_path):
    store = Store(tmp_path / "b.db")
    try:
        ids = add_entries(store, 300, distinct=False)
        book = board_book.BoardBook(store, paper=False)
        rows = book.rows()
        assert {tuple(r.rank) for r in rows} == {(1, 300)} and book.background_builds == 0
        store.update_board_entry(ids[0], published=0)
        rows = book.rows()
        assert len(rows) == 299 and {tuple(r.rank) for r in rows} == {(1, 299)} and rows[0].group_size == 299
        assert book.background_builds == 0
    finally:
        store.close()


def test_a_reader_never_waits_for_a_background_build(tmp_path, monkeypatch):
    """A group too large to rank on the request path is built in the background; readers meanwhile get the
    board at once, its entries marked "ranking…"; then the ranks."""
    monkeypatch.setattr(board_book, "PAIRS_ON_REQUEST", 20)         # 6 new grade sets are already "many"
    release = threading.Event()
    started = threading.Event()
    build = GroupRanks.build

    def slow_build(self, vectors, mult):
        started.set()
        assert release.wait(60)
        return build(self, vectors, mult)

    monkeypatch.setattr(GroupRanks, "build", slow_build)
    store = Store(tmp_path / "b.db")
    try:
        add_entries(store, 6, distinct=True)
        book = board_book.BoardBook(store, paper=False)
        rows = book.rows()                                     # returns although the build is held
        assert started.wait(60)
        assert [r.rank_cell() for r in rows] == ["…"] * 6 and rows[0].rank_note == RANKING_NOTE
        assert [r.rank_cell() for r in book.rows()] == ["…"] * 6       # a second reader: no wait either
        release.set()
        book._jobs.join()                                      # the background build has finished
        ranked = book.rows()
        assert all(r.rank for r in ranked) and book.background_builds == 1
        assert sorted(r.rank[0] for r in ranked)[0] == 1
    finally:
        release.set()
        store.close()


def test_a_bad_stored_row_is_logged_once(tmp_path, caplog):
    store = Store(tmp_path / "b.db")
    try:
        add_entries(store, 2, distinct=True)
        store._exec("UPDATE board_versions SET meta = ? WHERE entry_id = 'e0x0001'",
                    (json.dumps({"total": "lots"}),))
        book = board_book.BoardBook(store, paper=False)
        with caplog.at_level("WARNING"):
            assert [r.entry for r in book.rows()] == ["e0x0000"]
            store.update_board_entry("e0x0000", name="renamed")      # the board changes: refreshed again
            assert [r.name for r in book.rows()] == ["renamed"]
        assert sum("skipped entry 'e0x0001'" in r.getMessage() for r in caplog.records) == 1
    finally:
        store.close()


@pytest.mark.parametrize("n", [0, 1600])
def test_how_many_new_grade_sets_a_refresh_compares(n):
    assert board_book._max_new(n) * (n + board_book._max_new(n)) <= board_book.PAIRS_ON_REQUEST


def test_a_board_holds_its_entries_in_a_few_kilobytes_each_and_reads_them_back_as_stored(tmp_path):
    """A server keeps every entry of its board decoded (issue 33: 5,000 entries held as dicts of lists were
    ≈ 500 MB of the app's heap, which a crowd then fragmented). Held compactly, an entry costs ≈ 14 kB (≈ 99 kB
    before), and reads the same as the stored copy. Measured as what 100 more entries add to a board of 100."""
    import gc
    import tracemalloc

    store = Store(tmp_path / "b.db")
    try:
        add_entries(store, 100, distinct=False, seed=0)
        book = board_book.BoardBook(store, paper=False)
        book.refresh()
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            ids = add_entries(store, 100, distinct=False, seed=1)
            assert len(book.refresh()) == 200
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert held / 100 < 25_000, f"{held / 100:,.0f} bytes per entry"
        stored = store.board_version(ids[7], 1)["scores"]
        stored = json.loads(stored) if isinstance(stored, str) else stored
        entry = next(e for e in book.entries() if e.id == ids[7])
        assert dict(entry.scores) == stored and list(entry.scores) == entry.meta["sample_ids"]
        assert entry.sample_means(entry.sample_ids).tolist() == [stored[sid][0] for sid in entry.sample_ids]
    finally:
        store.close()
