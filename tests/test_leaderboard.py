"""The leaderboard (`mmvet_core.board` and its rules in `GradingService`): rank groups on hand-built score
tables, frozen copies and versions, who may do what, the publish rate limit, bounded inert names and links,
deep links, downloads, export / import."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from mmvet_core.board.backup import EXPORT_FILE, export_board, import_board
from mmvet_core.board.entries import GROUP_FULL_NOTE, BoardEntry, board_rows, owner_hash, rank_bounds, rank_groups
from mmvet_core.board.fields import MAX_DISPLAY_NAME, MAX_LINK, BoardError, check_link, clean_display_name
from mmvet_core.board.rows import ESTIMATE_COLUMN, TABLE_COLUMNS, paper_rows
from mmvet_core.board.snapshot import judge_key
from mmvet_core.board.filters import BoardFilter, filter_from_query, filter_rows, filter_to_query, rows_csv
from mmvet_core.board.publishing import check_name_free, load_entry
from mmvet_core.runs import provenance as prov
from mmvet_core.service import (JUDGE_BASELINE, JUDGE_OWN, BenchmarkChoice, GradingService, JudgeChoice, ServiceError,
                                ServiceSettings)
from mmvet_core.store import Store
from tests.cli_run import run_cli

REFERENCE = Path(__file__).resolve().parents[1] / "assets" / "reference"
GRADES_13B = REFERENCE / "llava-v1.5-13b_gpt-4-grade-3runs.json"
GRADES_7B = REFERENCE / "llava-v1.5-7b_gpt-4-grade-3runs.json"
GRADES_7B_1RUN = REFERENCE / "llava-v1.5-7b_gpt-4-grade-1runs.json"
N = 100


def ones(*ranges) -> np.ndarray:
    """A per-sample score vector over N samples: 1 on the given index ranges, 0 elsewhere."""
    v = np.zeros(N)
    for r in ranges:
        v[list(r)] = 1.0
    return v


# Hand-built tables. A 60 %, B 50 %, C 40 %: A beats C on 30 samples and loses on 10 (significant); B differs from
# both on many samples both ways (never significant).
A, B, C = ones(range(10, 70)), ones(range(0, 25), range(70, 95)), ones(range(0, 40))
RANK_CASES = [
    ("separated", [ones(range(0, 90)), ones(range(0, 50)), ones(range(0, 10))], [(1, 1), (2, 2), (3, 3)]),
    ("two-identical-and-a-weaker", [A, A, C], [(1, 2), (1, 2), (3, 3)]),
    ("all-identical", [C, C, C], [(1, 3), (1, 3), (1, 3)]),
    ("middle-not-separable", [A, B, C], [(1, 2), (1, 3), (2, 3)]),
    ("order-does-not-matter", [C, B, A], [(2, 3), (1, 3), (1, 2)]),
    ("alone", [B], [(1, 1)]),
]


@pytest.mark.parametrize("table, expected", [c[1:] for c in RANK_CASES], ids=[c[0] for c in RANK_CASES])
def test_rank_bounds_on_hand_built_tables(table, expected):
    assert rank_bounds(np.vstack(table)) == expected


def test_ranks_are_reproducible_and_paired():
    """Seeded: the same answer every time. Paired: +5 points won on 5 samples and lost on none is significant
    (a draw without any of the 5 has probability 0.95^100 = 0.6 %), though the two separate intervals overlap
    widely; +2 points on 2 samples is not (0.98^100 = 13 % of the draws show no difference)."""
    base = ones(range(0, 40))
    assert rank_bounds(np.vstack([base, ones(range(0, 45))])) == [(2, 2), (1, 1)]
    assert rank_bounds(np.vstack([base, ones(range(0, 42))])) == [(1, 2), (1, 2)]
    borderline = np.vstack([base, ones(range(0, 43)), ones(range(0, 44))])
    assert len({tuple(rank_bounds(borderline)) for _ in range(3)}) == 1


GRADED_HERE = {"source": "graded", "judge": "gpt-4-0613", "endpoints": ["api.openai.com"], "verified_by": "server"}
IMPORTED = {"source": "imported", "judge": "gpt-4-0613 (100 grades)", "endpoints": [], "verified_by": ""}


def entry(eid: str, scores: np.ndarray, *, judge="gpt-4-0613", kind="official", bench="v1", sha="s",
          provenance=GRADED_HERE, overrides=0) -> BoardEntry:
    ids = [f"v1_{i}" for i in range(len(scores))]
    meta = {"judge": judge, "judge_key": judge_key(judge, kind), "judge_kind": kind, "benchmark": bench,
            "benchmark_label": bench, "samples_sha": sha, "sample_ids": ids, "runs": 1,
            "total": 100 * float(np.mean(scores)), "ci": [None, None], "capabilities": {}, "integrations": {},
            "date": "2026-12-04", "provenance": provenance, "overrides": overrides}
    return BoardEntry(eid, 1, "run", "", eid, "", True, False, 0.0, meta,
                      {sid: [float(s)] for sid, s in zip(ids, scores)})


def test_different_judges_benchmarks_or_samples_are_never_ranked_together():
    entries = [entry("a", A), entry("c", C),                     # one group: A beats C
               entry("c-4o", C, judge="gpt-4o", kind="successor"),     # alone: another judge
               entry("a-v2", A, bench="v2"),                     # alone: another benchmark
               entry("a-other", A, sha="t"),                     # alone: other samples under the same ids
               # the official model under another prompt is another judge than the official metric
               entry("c-prompt", C, judge="gpt-4-0613", kind="successor")]
    ranks = rank_groups(entries)
    assert ranks == {"a": (1, 1, 2), "c": (2, 2, 2), "c-4o": (1, 1, 1), "a-v2": (1, 1, 1), "a-other": (1, 1, 1),
                     "c-prompt": (1, 1, 1)}


def test_one_model_name_on_two_endpoints_is_two_judges():
    here = {**GRADED_HERE, "judge": "qwen2-vl-72b", "endpoints": ["judge-a.example"]}
    there = {**here, "endpoints": ["judge-b.example"]}
    ranks = rank_groups([entry("a", A, judge="qwen2-vl-72b", kind="successor", provenance=here),
                         entry("c", C, judge="qwen2-vl-72b", kind="successor", provenance=there)])
    assert ranks == {"a": (1, 1, 1), "c": (1, 1, 1)}


# --- provenance (issue 26, attack 1): claims are never ranked with grades made here ---------------------------------
UNRANKED = [
    ("imported-file", dict(provenance=IMPORTED), "not ranked: imported, judge not verified"),
    ("visitors-own-endpoint", dict(provenance={**GRADED_HERE, "endpoints": ["evil.example"], "verified_by": ""}),
     "not ranked: graded on a visitor's endpoint, judge not verified"),     # never its host name (issue 33)
    ("stored-before-provenance", dict(provenance=None), "not ranked: provenance unknown, judge not verified"),
    ("human-overrides", dict(overrides=218), "not ranked: human overrides (the owner's corrected score)"),
]


@pytest.mark.parametrize("kwargs, note", [c[1:] for c in UNRANKED], ids=[c[0] for c in UNRANKED])
def test_a_perfect_score_that_is_only_claimed_is_listed_but_never_ranked(kwargs, note):
    """A grade file of 1.0 everywhere naming gpt-4-0613 (the audit's forged rank 1) is on the board, visibly
    unverified, and ranks nothing: the honest entries keep their ranks."""
    forged = entry("forged", np.ones(N), **kwargs)
    entries = [entry("a", A), entry("c", C), forged]
    ranks = rank_groups(entries)
    assert ranks == {"a": (1, 1, 2), "c": (2, 2, 2)}
    row = {r.entry: r for r in board_rows(entries, ranks)}["forged"]
    assert (row.rank, row.rank_note, row.cells()[0], row.total) == (None, note, "—", 100.0)
    assert row.to_json()["verified"] is (kwargs.get("overrides", 0) > 0)
    assert row.cells()[TABLE_COLUMNS.index("provenance")] == row.provenance == note.removeprefix("not ranked: ") \
        or kwargs.get("overrides")


def test_the_host_verification_ranks_an_imported_entry():
    forged = entry("imp", A, provenance=prov.mark_verified(IMPORTED, at=1.0))
    ranks = rank_groups([forged, entry("c", C)])
    assert ranks == {"imp": (1, 1, 2), "c": (2, 2, 2)}
    row = board_rows([forged], ranks)[0]
    assert (row.provenance, row.verified) == ("imported, verified by the host", True)


def test_identical_grades_count_once_in_the_work_and_each_in_the_ranks():
    """1,600 copies of one run (the audit's 11 s recompute): one grade set of multiplicity 1,600; the ranks
    equal those of the plain per-entry rule."""
    copies = [entry(f"copy{i}", C) for i in range(1600)]
    ranks = rank_groups([entry("a", A), *copies])
    assert ranks["a"] == (1, 1, 1601) and ranks["copy0"] == ranks["copy1599"] == (2, 1601, 1601)
    small = [entry("a", A), *copies[:3]]
    assert [ranks[e.id][:2] for e in small[:1]] == [tuple(b) for b in rank_bounds(np.vstack([A, C, C, C]))[:1]]
    assert rank_groups(small) == {"a": (1, 1, 4), **{f"copy{i}": (2, 4, 4) for i in range(3)}}


def test_a_group_ranks_a_bounded_number_of_grade_sets(monkeypatch):
    """The bound per group: past `MAX_GRADE_SETS` distinct grade sets, later entries are listed unranked (copies
    of a ranked grade set still rank: they cost nothing)."""
    monkeypatch.setattr("mmvet_core.board.entries.MAX_GRADE_SETS", 2)
    entries = [entry("a", A), entry("b", B), entry("c", C), entry("a2", A)]
    ranks = rank_groups(entries)
    assert set(ranks) == {"a", "b", "a2"} and ranks["a"][2] == 3
    assert {r.entry: r.rank_note for r in board_rows(entries, ranks)}["c"] == GROUP_FULL_NOTE


def test_gpt_4_and_gpt_4_0613_are_one_official_judge():
    assert judge_key("gpt-4", "official") == judge_key("gpt-4-0613", "official") == "gpt-4-0613"
    assert judge_key("gpt-4o", "successor") == "gpt-4o"


# --- what a visitor types ---------------------------------------------------------------------------------------
NAME_CASES = [
    ("plain", "LLaVA-1.5 13b", "LLaVA-1.5 13b"),
    ("script-stays-text", "<script>alert(1)</script>", "<script>alert(1)</script>"),
    ("newlines-collapsed", "a\nb\r\nc", "a b c"),
    ("wide-spaces-collapsed", "a\u3000\u2003b", "a b"),
    ("trimmed", "   x   ", "x"),
    ("other-scripts-are-names-too", "Модель 13B · 模型", "Модель 13B · 模型"),
    ("one-accent", "Qwen-VL-Plus e\u0301", "Qwen-VL-Plus é"),
]


@pytest.mark.parametrize("raw, clean", [c[1:] for c in NAME_CASES], ids=[c[0] for c in NAME_CASES])
def test_display_names_are_one_line_of_text(raw, clean):
    assert clean_display_name(raw) == clean


@pytest.mark.parametrize("raw", ["", "   ", "\u202e", "x" * (MAX_DISPLAY_NAME + 1)], ids=["empty", "blank", "only-bidi", "too-long"])
def test_bad_display_names_are_refused(raw):
    with pytest.raises(BoardError):
        clean_display_name(raw)


# The audit's invisible names (issue 26, attack 2), and their cousins: each is refused, naming the character.
INVISIBLE = [
    ("word-joiner", "LLaVA\u2060-13B", "U+2060"),
    ("hangul-filler", "LLaVA-13B\u3164", "U+3164"),
    ("arabic-letter-mark", "\u061cLLaVA-13B", "U+061C"),
    ("tag-characters", "LLaVA-13B\U000e0041\U000e0042", "U+E0041"),
    ("ten-braille-blanks", "\u2800" * 10, "U+2800"),
    ("zero-width-space", "a\u200bb", "U+200B"),
    ("bidi-override", "evil\u202egnp.exe", "U+202E"),
    ("hangul-choseong-filler", "\u115f", "U+115F"),
    ("hangul-jungseong-filler", "x\u1160", "U+1160"),
    ("halfwidth-hangul-filler", "x\uffa0", "U+FFA0"),
    ("private-use", "LLaVA\ue000", "U+E000"),
    ("unassigned", "LLaVA\u0378", "U+0378"),
    ("line-separator", "a\u2028b", "U+2028"),
    ("variation-selector", "LLaVA\ufe0f", "U+FE0F"),
    ("soft-hyphen", "LLa\u00adVA", "U+00AD"),
    ("control", "LLaVA\x07", "U+0007"),
]


@pytest.mark.parametrize("raw, code", [c[1:] for c in INVISIBLE], ids=[c[0] for c in INVISIBLE])
def test_invisible_and_format_characters_are_refused_by_name(raw, code):
    with pytest.raises(BoardError, match=code.replace("+", r"\+")):
        clean_display_name(raw)


@pytest.mark.parametrize("raw", ["\u0301\u0301", "a\u0301\u0302\u0303\u0304"], ids=["only-accents", "accent-tower"])
def test_names_of_nothing_visible_are_refused(raw):
    with pytest.raises(BoardError, match="visible|accents"):
        clean_display_name(raw)


LOOKALIKES = [
    ("cyrillic-a", "LLаVA-13B"),
    ("case", "llava-13b"),
    ("capital-i-for-l", "IlaVA-13B"),
    ("fullwidth", "ＬＬａＶＡ-13B"),
    ("digit-one-for-l", "L1aVA-13B"),
    ("greek-alpha-and-cyrillic-v", "LLαѴA-13B"),
]


@pytest.mark.parametrize("name", [c[1] for c in LOOKALIKES], ids=[c[0] for c in LOOKALIKES])
def test_a_name_confusable_with_another_owners_is_refused(name):
    heads = [{"id": "victim", "owner_hash": owner_hash("victim"), "name": "LLaVA-13B"}]
    with pytest.raises(BoardError, match="looks the same"):
        check_name_free(heads, name, owner_hash("mallory"))
    check_name_free(heads, name, owner_hash("victim"))                # the owner's own names are the owner's
    check_name_free(heads, "LLaVA-7B", owner_hash("mallory"))         # another model is another name


def test_a_name_confusable_with_the_papers_rows_is_refused():
    with pytest.raises(BoardError, match="reference row"):
        check_name_free([], "LLaVA-13B (LLаMA-2) (paper)", owner_hash("mallory"))


LINK_REFUSED = [
    ("javascript", "javascript:alert(1)"),
    ("javascript-mixed-case", "JaVaScRiPt:alert(document.cookie)"),
    ("javascript-after-space", " \tjavascript:alert(1)"),
    ("data", "data:text/html,<script>alert(1)</script>"),
    ("http", "http://example.org/paper"),
    ("relative", "/gradio_api/file=/etc/passwd"),
    ("protocol-relative", "//evil.example/x"),
    ("quote-breaks-attribute", 'https://x.org/" onmouseover="alert(1)'),
    ("angle-brackets", "https://x.org/<script>"),
    ("credentials", "https://user:pw@x.org/"),
    ("no-host", "https:///path"),
    ("too-long", "https://x.org/" + "a" * MAX_LINK),
    ("https-then-javascript", "https:javascript:alert(1)"),
]


@pytest.mark.parametrize("url", [c[1] for c in LINK_REFUSED], ids=[c[0] for c in LINK_REFUSED])
def test_links_other_than_plain_https_are_refused(url):
    with pytest.raises(BoardError):
        check_link(url)


def test_https_links_and_no_link_are_accepted():
    assert check_link("https://huggingface.co/liuhaotian/llava-v1.5-13b") == \
        "https://huggingface.co/liuhaotian/llava-v1.5-13b"
    assert check_link(None) == ""


def test_csv_download_neutralises_formulas():
    row = board_rows([entry("e1", A)], {})[0]
    row.name = "=HYPERLINK(\"https://evil\",\"click\")"
    parsed = list(csv.reader(io.StringIO(rows_csv([row]))))
    assert parsed[0][:5] == ["rank", "name", "total", "95% CI", ESTIMATE_COLUMN]
    assert parsed[1][1] == "'=HYPERLINK(\"https://evil\",\"click\")"


DEEP_LINKS = [
    ("round-trip", "judge=gpt-4o&benchmark=v1&q=llava&sort=total&desc=1",
     BoardFilter("gpt-4o", "v1", "llava", "total", True, True)),
    ("unknown-sort-ignored", "sort=__class__&refs=0", BoardFilter(sort="rank", references=False)),
    ("garbage", "%%%&&==;<script>", BoardFilter()),
    ("bounded", "q=" + "x" * 5000, BoardFilter(query="x" * 80)),
]


@pytest.mark.parametrize("text, expected", [c[1:] for c in DEEP_LINKS], ids=[c[0] for c in DEEP_LINKS])
def test_deep_link_filters(text, expected):
    assert filter_from_query(text) == expected
    assert filter_from_query(filter_to_query(expected)) == expected


def test_filter_and_sort_rows():
    rows = board_rows([entry("a", A), entry("c", C), entry("b4o", B, judge="gpt-4o", kind="successor")],
                      rank_groups([entry("a", A), entry("c", C)])) + paper_rows()
    names = lambda f: [r.name for r in filter_rows(rows, f)]        # noqa: E731
    assert names(BoardFilter(references=False)) == ["a", "c", "b4o"]
    assert names(BoardFilter(judge="successor")) == ["b4o"]
    assert names(BoardFilter(judge="official", references=False)) == ["a", "c"]
    assert names(BoardFilter(sort="total", references=False)) == ["c", "b4o", "a"]
    assert names(BoardFilter(sort="total", descending=True, references=False)) == ["a", "b4o", "c"]
    refs = filter_rows(rows, BoardFilter(benchmark="v1-bard"))
    assert refs and all(r.reference and r.rank is None and r.cells()[0] == "ref" for r in refs)
    assert "Bard" in refs[0].benchmark_label and refs[0].judge == "gpt-4-0613 (paper)"


# --- the service's rules ----------------------------------------------------------------------------------------
SECRET = "host-secret-123"


@pytest.fixture
def svc(tmp_path):
    s = GradingService(ServiceSettings(data_dir=tmp_path / "data", host_secret=SECRET, publish_per_hour=3))
    yield s
    s.jobs.shutdown()
    s.store.close()


def opened(svc: GradingService, path: Path, owner: str, subset: str = "All samples") -> str:
    """A finished run of `owner`: the official grades of a reference model (no judge call)."""
    return svc.runs.open_grade_file(str(path), BenchmarkChoice(subset=subset), owner)


def test_publish_freezes_the_scores_and_republish_is_a_new_version(svc):
    run = opened(svc, GRADES_13B, "alice")
    row = svc.board.publish(run, "LLaVA-1.5 13b", "https://github.com/haotian-liu/LLaVA", "alice", visitor="va")
    assert (row["name"], row["total"], row["judge_kind"], row["benchmark"], row["runs"], row["version"]) == \
        ("LLaVA-1.5 13b", 36.3, "claimed, not verified", "v1", 3, 1)
    # a grade file's judge is its claim: listed with its total, marked, not ranked until the host verifies it
    assert row["ci"] == [30.7, 42.0] and row["rank"] is None and row["verified"] is False
    assert row["provenance"] == "imported, judge not verified"
    assert row["provenance_detail"]["source"] == "imported" and "gpt-4" in row["provenance_detail"]["judge"]
    assert "verified by the host" in svc.board.verify_entry(row["entry"], SECRET, visitor="vh")
    verified = svc.board.board_entry(row["entry"])["row"]
    assert (verified["rank"], verified["provenance"]) == ([1, 1], "imported, verified by the host")
    detail = svc.board.board_entry(row["entry"])
    assert len(detail["samples"]) == 218 and detail["samples"][0]["id"] == "v1_0"
    frozen = {s["id"]: s["scores"] for s in detail["samples"]}

    svc.runs.override(run, "alice", "v1_0", 1.0 if frozen["v1_0"][0] < 1 else 0.0, "a human grade")
    assert svc.board.board_entry(row["entry"])["row"]["total"] == 36.3         # the board did not move
    assert svc.board.entry_of_run(run, "alice")["stale"] is True
    with pytest.raises(ServiceError, match="already on the board"):
        svc.board.publish(run, "again", "", "alice", visitor="va")
    again = svc.board.publish(run, "LLaVA-1.5 13b", "", "alice", visitor="va", republish=True)
    assert again["entry"] == row["entry"] and again["version"] == 2 and again["total"] != 36.3
    assert again["rank"] is None and again["verified"] is False         # a new version is not verified
    assert svc.board.board_entry(row["entry"])["versions"] == [1, 2]

    svc.runs.delete(run, "alice")                                             # the run is gone, the entry stays
    assert svc.board.board_entry(row["entry"])["row"]["version"] == 2
    assert [r.name for r in svc.board.leaderboard({"references": False})] == ["LLaVA-1.5 13b"]


def test_only_finished_runs_are_published(svc, tmp_path):
    grades = json.loads(GRADES_7B_1RUN.read_text())
    partial = tmp_path / "llava-v1.5-7b-partial_gpt-4-grade-1runs.json"
    partial.write_text(json.dumps(dict(list(grades.items())[:100])))
    run = opened(svc, partial, "alice")
    with pytest.raises(ServiceError, match="finished run"):
        svc.board.publish(run, "partial", "", "alice", visitor="va")


def test_nobody_but_the_owner_publishes_renames_or_unpublishes(svc):
    run = opened(svc, GRADES_13B, "alice")
    for who in ("mallory", ""):
        with pytest.raises(ServiceError, match="owner"):
            svc.board.publish(run, "stolen", "", who, visitor="vm")
    entry = svc.board.publish(run, "LLaVA 13b", "", "alice", visitor="va")["entry"]
    for who in ("mallory", ""):
        with pytest.raises(ServiceError, match="owner"):
            svc.board.rename_entry(entry, who, "pwned", visitor="vm")
        with pytest.raises(ServiceError, match="owner"):
            svc.board.unpublish(entry, who, visitor="vm")
    assert svc.board.board_entry(entry)["row"]["name"] == "LLaVA 13b"

    assert svc.board.rename_entry(entry, "alice", "LLaVA-1.5 13b", "https://x.org/card", visitor="va")
    assert (svc.board.board_entry(entry)["row"]["name"], svc.board.board_entry(entry)["row"]["link"]) == \
        ("LLaVA-1.5 13b", "https://x.org/card")
    with pytest.raises(ServiceError, match="https"):
        svc.board.rename_entry(entry, "alice", "ok", "javascript:alert(1)", visitor="va")
    svc.board.unpublish(entry, "alice", visitor="va")
    assert svc.board.leaderboard({"references": False}) == []
    with pytest.raises(ServiceError, match="No such"):
        svc.board.board_entry(entry)
    svc.board.restore_entry(entry, "alice", visitor="va2")
    assert [r.entry for r in svc.board.leaderboard({"references": False})] == [entry]


def test_the_host_hides_any_entry_with_the_secret_only(svc, tmp_path):
    entry = svc.board.publish(opened(svc, GRADES_13B, "alice"), "LLaVA 13b", "", "alice", visitor="va")["entry"]
    for secret in ("", "wrong", "host-secret-12"):
        with pytest.raises(ServiceError, match="host"):
            svc.board.hide_entry(entry, secret, visitor="vm")
    # guessing the secret is a board action: after the hour's three, even the right secret is refused from there
    with pytest.raises(ServiceError, match="3 times in the last hour"):
        svc.board.hide_entry(entry, SECRET, visitor="vm")
    with pytest.raises(ServiceError, match="3 times in the last hour"):
        svc.board.verify_entry(entry, SECRET, visitor="vm")
    with pytest.raises(ServiceError, match="owner"):
        svc.board.unpublish(entry, SECRET)                        # the secret is not an owner token
    svc.board.hide_entry(entry, SECRET, visitor="vh")
    assert svc.board.leaderboard({"references": False}) == []
    svc.board.restore_entry(entry, "alice", visitor="va")         # the owner cannot undo the host's hiding
    assert svc.board.leaderboard({"references": False}) == []
    svc.board.hide_entry(entry, SECRET, hidden=False, visitor="vh")
    assert len(svc.board.leaderboard({"references": False})) == 1
    no_secret = GradingService(ServiceSettings(data_dir=tmp_path / "other"))
    try:
        for control in (no_secret.board.hide_entry, no_secret.board.verify_entry):
            with pytest.raises(ServiceError, match="host"):
                control(entry, "")                          # no secret configured: no host control at all
    finally:
        no_secret.store.close()


def test_publishing_is_rate_limited_per_visitor(svc):
    runs = [opened(svc, p, "alice") for p in (GRADES_13B, GRADES_7B, GRADES_7B_1RUN)]
    svc.board.publish(runs[0], "one", "", "alice", visitor="va")
    svc.board.publish(runs[0], "one", "", "alice", visitor="va", republish=True)
    svc.board.publish(runs[1], "two", "", "alice", visitor="va")
    with pytest.raises(ServiceError, match="3 times in the last hour"):
        svc.board.publish(runs[2], "three", "", "alice", visitor="va")
    svc.board.publish(runs[2], "three", "", "alice", visitor="another address")     # per visitor
    with pytest.raises(ServiceError, match="No run"):
        svc.board.publish("no-such-run", "x", "", "alice", visitor="vz")           # refusals cost nothing
    assert svc.store.count_publishes("vz", 0) == 0


def test_unpublish_rename_and_restore_join_the_publish_limit(svc):
    """Issue 26, attack 4: one unpublish (free, unlimited) made every reader wait for a recompute; now each of
    them is a board action of the visitor's hour."""
    entry = svc.board.publish(opened(svc, GRADES_13B, "alice"), "13b", "", "alice", visitor="va")["entry"]
    svc.board.unpublish(entry, "alice", visitor="va")
    svc.board.restore_entry(entry, "alice", visitor="va")
    for action in (lambda: svc.board.unpublish(entry, "alice", visitor="va"),
                   lambda: svc.board.rename_entry(entry, "alice", "13b again", visitor="va"),
                   lambda: svc.board.restore_entry(entry, "alice", visitor="va")):
        with pytest.raises(ServiceError, match="3 times in the last hour"):
            action()
    assert [r.name for r in svc.board.leaderboard({"references": False})] == ["13b"]


def test_names_and_links_are_validated_before_anything_is_stored(svc):
    run = opened(svc, GRADES_13B, "alice")
    for name, link, message in [("", "", "display name"), ("x" * 81, "", "80"), ("LLaVA\u3164", "", "U\\+3164"),
                                ("ok", "javascript:alert(1)", "https"), ("ok", "data:text/html,x", "https")]:
        with pytest.raises(ServiceError, match=message):
            svc.board.publish(run, name, link, "alice", visitor="va")
    assert svc.store.board_entries(include_withdrawn=True) == []
    assert svc.store.count_publishes("va", 0) == 0                      # refused before the limit counts
    row = svc.board.publish(run, "<img src=x onerror=alert(1)>", "", "alice", visitor="va")
    assert row["name"] == "<img src=x onerror=alert(1)>"        # kept as text; every view shows it as text


def test_a_look_alike_of_another_owners_name_is_refused_on_publish_and_rename(svc):
    """Issue 26, attack 2: a Cyrillic а, or the same name in other case, next to the real "LLaVA-13B"."""
    svc.board.publish(opened(svc, GRADES_13B, "victim"), "LLaVA-13B", "", "victim", visitor="v1")
    run = opened(svc, GRADES_7B, "mallory")
    for fake in ("LLаVA-13B", "llava-13b", "LLaVA-13B"):
        with pytest.raises(ServiceError, match="looks the same"):
            svc.board.publish(run, fake, "", "mallory", visitor="v2")
    with pytest.raises(ServiceError, match="3 times in the last hour"):     # probing names is bounded too
        svc.board.publish(run, "LLaVA-13В", "", "mallory", visitor="v2")
    entry = svc.board.publish(run, "Mallory's 7B", "", "mallory", visitor="v3")["entry"]
    with pytest.raises(ServiceError, match="looks the same"):
        svc.board.rename_entry(entry, "mallory", "ⅬLaVA-13B", visitor="v3")
    svc.board.unpublish(entry, "mallory", visitor="v3")
    assert [r.name for r in svc.board.leaderboard({"references": False})] == ["LLaVA-13B"]


def test_another_owners_grades_are_refused_whatever_the_name(svc, tmp_path):
    """Issue 26, attack 1: the victim's public per-sample scores, written back as an official grade file and
    published again (under the victim's name or any other), are refused; the victim's own republish is not."""
    victim = svc.board.publish(opened(svc, GRADES_7B, "victim"), "keyword baseline 7b", "", "victim", visitor="v1")
    means = {s["id"]: sum(s["scores"]) / len(s["scores"]) for s in svc.board.board_entry(victim["entry"])["samples"]}
    copied = {sid: {"model": ["gpt-4-0613"] * 5, "content": [repr(m)] * 5, "score": [m] * 5}   # 5 "official" runs
              for sid, m in means.items()}
    path = tmp_path / "llava-v1.5-7b_gpt-4-0613-grade-5runs.json"
    path.write_text(json.dumps(copied))
    run = opened(svc, path, "mallory")
    with pytest.raises(ServiceError, match="already on the board as “keyword baseline 7b”") as refused:
        svc.board.publish(run, "Mallory's official 7B", "", "mallory", visitor="v2")
    assert victim["entry"] in str(refused.value)
    flipped = 1.0 - copied["v1_0"]["score"][0]
    one_changed = {**copied, "v1_0": {**copied["v1_0"], "score": [flipped] * 5, "content": [repr(flipped)] * 5}}
    path.write_text(json.dumps(one_changed))
    with pytest.raises(ServiceError, match="all but 1 of 218 samples"):
        svc.board.publish(opened(svc, path, "mallory"), "Mallory's official 7B", "", "mallory", visitor="v3")
    assert svc.store.count_publishes("v2", 0) == 1          # the refusal counted: copying is a board action too
    assert [r.name for r in svc.board.leaderboard({"references": False})] == ["keyword baseline 7b"]


def test_13b_and_7b_are_two_rank_groups_and_the_paper_rows_are_references(svc):
    for path, owner, name, subset in [(GRADES_13B, "alice", "13b", "All samples"), (GRADES_7B, "bob", "7b", "All samples"),
                                      (GRADES_7B_1RUN, "bob", "7b bard", "Bard set (168)")]:
        entry = svc.board.publish(opened(svc, path, owner, subset), name, "", owner, visitor=owner)["entry"]
        svc.board.verify_entry(entry, SECRET, visitor="host")     # the host vouches for the official grade files
    table = svc.board.leaderboard_json("benchmark=v1")
    ranked = [(e["name"], e["rank"]) for e in table["entries"] if not e["reference"]]
    assert ranked == [("13b", [1, 1]), ("7b", [2, 2])]
    refs = [e for e in table["entries"] if e["reference"]]
    assert {e["judge"] for e in refs} == {"gpt-4-0613 (paper)"} and all(e["rank"] is None for e in refs)
    assert {e["provenance"] for e in refs} == {"paper: official metric (gpt-4-0613, 5 runs)"}
    assert any(e["name"] == "LLaVA-13B (LLaMA-2) (paper)" and e["total"] == 32.9 for e in refs)
    bard = svc.board.leaderboard_json({"benchmark": "v1-bard", "references": False})["entries"]
    assert [(e["name"], e["rank"]) for e in bard] == [("7b bard", [1, 1])]      # never ranked with the full set


# --- grades made here: provenance from the run itself ------------------------------------------------------------
RESULTS_13B = REFERENCE / "llava-v1.5-13b.json"


def graded(svc: GradingService, judge: JudgeChoice, owner: str, path: Path = RESULTS_13B) -> str:
    run_id, _ = svc.runs.start(str(path), BenchmarkChoice(), 1, judge, owner=owner, visitor=owner)
    svc.jobs.wait(run_id, timeout=300)
    return run_id


def test_grades_made_here_are_verified_and_a_visitors_own_endpoint_is_not(tmp_path, fake_judge):
    """Grades this server made (the offline baseline here; its own judge endpoint in the app's tests) are
    verified; a visitor's endpoint (the fake judge under another host name, as an attacker's server answering
    1.0 would be) is recorded and marked, and never ranked with them."""
    s = GradingService(ServiceSettings(data_dir=tmp_path / "data", host_key="sk-host", host_base_url=fake_judge.url,
                                       allow_private_endpoints=True, host_secret=SECRET))
    try:
        mine = s.board.publish(graded(s, JudgeChoice(JUDGE_BASELINE), "alice"), "13b, keyword baseline", "", "alice",
                         visitor="va")
        assert (mine["provenance"], mine["verified"], mine["rank"]) == \
            ("graded here (offline baseline)", True, [1, 1])
        own = JudgeChoice(JUDGE_OWN, base_url=fake_judge.url.replace("127.0.0.1", "localhost"), model="gpt-4-0613",
                          api_key="sk-mallory")
        fake_judge.state.answer_fn = lambda prompt, temperature: "1.0"      # "gpt-4-0613" says: perfect
        theirs = s.board.publish(graded(s, own, "mallory", REFERENCE / "llava-v1.5-7b.json"), "7b on my own judge", "",
                           "mallory", visitor="vm")
        assert (theirs["provenance"], theirs["verified"], theirs["rank"]) == \
            ("graded on a visitor's endpoint, judge not verified", False, None)
        # the visitor's host name is shown to nobody (issue 33), not even in the record
        assert theirs["provenance_detail"]["endpoints"] == ["a visitor's endpoint"]
        assert "localhost" not in json.dumps(theirs)
        # its claim, beside the mark: never read as the official judge (issue 33)
        assert (theirs["judge"], theirs["judge_kind"], theirs["total"]) == \
            ("claims gpt-4-0613 (not verified)", "claimed, not verified", 100.0)
        s.board.verify_entry(theirs["entry"], SECRET, visitor="host")
        ranked = {e["name"]: e["rank"] for e in s.board.leaderboard_json({"references": False})["entries"]}
        assert ranked == {"13b, keyword baseline": [1, 1], "7b on my own judge": [1, 1]}   # two judges, two groups
    finally:
        s.jobs.shutdown()
        s.store.close()


def test_a_fabricated_official_claim_reads_as_a_claim_never_as_the_official_metric(svc, tmp_path):
    """Issue 33: a grade file claiming gpt-4-0613 with every score 1.0, published, read on the board as
    "gpt-4-0613 / official" with 100.0. It now reads as a claim nobody verified: its judge says so, its kind is
    not "official", its estimate column is not the official metric, and the official judge's filter omits it."""
    fake = {sid: {"model": ["gpt-4-0613"], "content": ["1.0"], "score": [1.0]}
            for sid in json.loads(GRADES_7B_1RUN.read_text(encoding="utf-8"))}
    path = tmp_path / "model_gpt-4-0613-grade-1runs.json"
    path.write_text(json.dumps(fake), encoding="utf-8")
    row = svc.board.publish(opened(svc, path, "mallory"), "perfect model", "", "mallory", visitor="vm")
    assert (row["judge"], row["judge_kind"], row["total"], row["rank"], row["verified"]) == \
        ("claims gpt-4-0613 (not verified)", "claimed, not verified", 100.0, None, False)
    shown = next(r for r in svc.board.leaderboard() if r.entry == row["entry"])
    cells = dict(zip(TABLE_COLUMNS, shown.cells()))
    assert cells["judge"] == "claims gpt-4-0613 (not verified)" and cells["kind"] != "official"
    assert "official metric" not in " ".join(str(c) for c in cells.values())
    official = svc.board.leaderboard_json({"judge": "gpt-4-0613", "references": False})["entries"]
    assert [(e["judge"], e["rank"]) for e in official if e["entry"] == row["entry"]] == \
        [("claims gpt-4-0613 (not verified)", None)]         # listed beside the official judge's, as a claim
    # the host vouches for it: then (and only then) it reads as the official judge
    svc.board.verify_entry(row["entry"], SECRET, visitor="vh")
    verified = svc.board.board_entry(row["entry"])["row"]
    assert (verified["judge_kind"], verified["verified"]) == ("official", True)


def test_a_run_resumed_on_another_endpoint_names_both(store):
    from mmvet_core.runs import provenance as pv
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.judging.judge import JudgeSettings
    from mmvet_core.runs.lifecycle import create_run

    run = create_run(store, benchmark=load_bundled_v1(), spec="bundled", predictions={}, n_runs=1,
                     settings=JudgeSettings(model="gpt-4-0613", base_url="http://127.0.0.1:8000/v1"),
                     model_name="m", owner="o")
    pv.note_endpoint(store, run, "https://evil.example/v1")
    pv.note_endpoint(store, run, "https://evil.example/v1")
    assert pv.run_endpoints(store.get_run(run).judge) == ["127.0.0.1:8000", "evil.example"]


# --- export / import --------------------------------------------------------------------------------------------
def test_export_is_a_dataset_folder_and_import_round_trips(svc, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    run = opened(svc, GRADES_13B, "alice")
    e13 = svc.board.publish(run, "13b", "https://x.org", "alice", visitor="va")["entry"]
    svc.runs.override(run, "alice", "v1_1", 1.0, "human")
    svc.board.publish(run, "13b", "https://x.org", "alice", visitor="va", republish=True)
    e7 = svc.board.publish(opened(svc, GRADES_7B, "bob"), "7b", "", "bob", visitor="vb")["entry"]
    svc.board.verify_entry(e7, SECRET, visitor="host")
    svc.board.unpublish(e7, "bob", visitor="vb")
    out = tmp_path / "board-export"
    export_board(svc.store, out)

    import datasets
    # datasets reads HF_HOME when first imported: an earlier test in this process fixed its cache, where a
    # folder of the same path from an earlier suite may be cached with other entries. Its own cache, always.
    ds = datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "ds-cache"))
    assert ds.num_rows == 3
    assert sorted((r["entry_id"], r["version"], r["current"], r["published"], r["provenance"]) for r in ds) == \
        sorted([(e13, 1, False, True, "imported, judge not verified"), (e13, 2, True, True,
                                                                        "imported, judge not verified"),
                (e7, 1, True, False, "imported, verified by the host")])
    assert "owner_hash" in ds.column_names and "alice" not in json.dumps(ds.to_list())

    fresh = GradingService(ServiceSettings(data_dir=tmp_path / "restored"))
    try:
        assert import_board(fresh.store, out, trust=True) == 3          # the host's own backup
        assert fresh.board.leaderboard_json({"references": False}) == svc.board.leaderboard_json({"references": False})
        for eid in (e13, e7):
            a, b = load_entry(svc.store, eid), load_entry(fresh.store, eid)
            assert (a.version, a.name, a.link, a.published, a.hidden, a.meta, a.scores) == \
                (b.version, b.name, b.link, b.published, b.hidden, b.meta, b.scores)
        fresh.board.restore_entry(e7, "bob")          # ownership survives the round trip (through the hash)
        with pytest.raises(ServiceError, match="owner"):
            fresh.board.unpublish(e13, "bob")
        export_board(fresh.store, tmp_path / "again")
        assert (tmp_path / "again" / EXPORT_FILE).read_text().count("\n") == 3
    finally:
        fresh.store.close()


def test_a_backup_is_its_own_word_until_the_host_trusts_it(svc, tmp_path):
    """Without --trust, a restored version keeps its claims visible and loses their verification: a backup
    edited to say "graded here, verified" ranks nothing until the host verifies the entry."""
    entry = svc.board.publish(opened(svc, GRADES_13B, "alice"), "13b", "", "alice", visitor="va")["entry"]
    svc.board.verify_entry(entry, SECRET, visitor="host")
    path = export_board(svc.store, tmp_path / "export")
    row = json.loads(path.read_text())
    meta = json.loads(row["meta"])
    meta["provenance"] = {**meta["provenance"], "source": "graded", "endpoints": ["api.openai.com"],
                          "verified_by": "server"}
    path.write_text(json.dumps({**row, "meta": json.dumps(meta), "provenance": prov.label(meta["provenance"])})
                    + "\n")
    fresh = GradingService(ServiceSettings(data_dir=tmp_path / "restored", host_secret=SECRET))
    try:
        assert import_board(fresh.store, path.parent) == 1
        shown = fresh.board.leaderboard_json({"references": False})["entries"][0]
        assert (shown["rank"], shown["verified"]) == (None, False)
        assert shown["provenance"] == "restored from a backup (graded on api.openai.com), judge not verified"
        fresh.board.verify_entry(entry, SECRET, visitor="host")
        assert fresh.board.leaderboard_json({"references": False})["entries"][0]["rank"] == [1, 1]
    finally:
        fresh.store.close()


def test_a_tampered_backup_never_replaces_an_entry_silently(svc, tmp_path):
    """Issue 33: `leaderboard import` of a tampered backup replaced a victim's entry silently (38.0 -> 0.0). The
    same backup (the victim's entry, every score set to 0, totals recomputed so that every field checks) is now
    refused with what it would change, and nothing is written; with --replace it is applied and the CLI prints
    what changed."""

    from mmvet_core.board.schema import recompute_totals

    entry = svc.board.publish(opened(svc, GRADES_13B, "alice"), "victim", "", "alice", visitor="va")["entry"]
    path = export_board(svc.store, tmp_path / "export")
    row = json.loads(path.read_text())
    zeros = {sid: [0.0] * len(v) for sid, v in json.loads(row["scores"]).items()}
    meta = recompute_totals(json.loads(row["meta"]), zeros)
    path.write_text(json.dumps({**row, "meta": json.dumps(meta), "scores": json.dumps(zeros),
                                "total": meta["total"], "ci_low": None, "ci_high": None}) + "\n")
    with pytest.raises(BoardError, match=rf"would change 1 entry already on this board \({entry} “victim”: "
                                            r"version 1 replaced: total 36\.3 → 0\.0\); nothing was imported\. "
                                            r"Pass --replace"):
        import_board(svc.store, path.parent)
    assert load_entry(svc.store, entry).meta["total"] == 36.3
    db = str(svc.store.path)
    cli = ["leaderboard", "import", str(path.parent), "--db", db]
    refused = run_cli(*cli)
    assert refused.returncode == 2 and "Pass --replace" in refused.stderr and "Traceback" not in refused.stderr
    assert load_entry(svc.store, entry).meta["total"] == 36.3
    replaced = run_cli(*cli, "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert f"{entry} “victim”: version 1 replaced: total 36.3 → 0.0" in replaced.stdout
    assert load_entry(svc.store, entry).meta["total"] == 0.0
    # a backup that changes nothing here imports without --replace
    report: list[str] = []
    assert import_board(svc.store, path.parent, report=report) == 1 and report == []


def _meta(row: dict, **changes) -> str:
    return json.dumps({**json.loads(row["meta"]), **changes})


def _caps(row: dict, **changes) -> str:
    meta = json.loads(row["meta"])
    return json.dumps({**meta, "capabilities": {**meta["capabilities"], **changes}})


def _scores(row: dict, sid: str, value) -> str:
    return json.dumps({**json.loads(row["scores"]), sid: value})


# Issue 26, attack 5: a crafted backup row, refused with its line and field; nothing is written.
TAMPERED = [
    ("bidi-name", lambda r: {**r, "name": "\u202e"}, "field name: .*U\\+202E"),
    ("hangul-filler-name", lambda r: {**r, "name": "13b\u3164"}, "field name: .*U\\+3164"),
    ("javascript-link", lambda r: {**r, "link": "javascript:alert(1)"}, "field link: .*https"),
    ("inflated-total", lambda r: {**r, "meta": _meta(r, total=99.0), "total": 99.0},
     "field meta.total: 99.0 is not what the scores give"),
    ("total-null", lambda r: {**r, "meta": _meta(r, total=None), "total": None}, "field meta.total: must be a number"),
    ("capability-lots", lambda r: {**r, "meta": _caps(r, rec="lots")}, "field meta.capabilities.rec: must be a number"),
    ("capability-inflated", lambda r: {**r, "meta": _caps(r, rec=99.9)},
     "field meta.capabilities.rec: 99.9 is not what the scores give"),
    ("runs-many", lambda r: {**r, "meta": _meta(r, runs="many"), "runs": "many"}, "field runs: must be a whole number"),
    ("ci-letters", lambda r: {**r, "meta": _meta(r, ci=["a", "b"])}, "field meta.ci: must be a number"),
    ("score-out-of-range", lambda r: {**r, "scores": _scores(r, "v1_0", [7.0, 0.0, 0.0])},
     r"field scores.v1_0: 7.0 is not a score in \[0, 1\]"),
    ("score-as-text", lambda r: {**r, "scores": _scores(r, "v1_0", ["1", "1", "1"])},
     r"field scores.v1_0: '1' is not a score"),
    ("missing-sample", lambda r: {**r, "scores": json.dumps({"v1_0": [1.0, 1.0, 1.0]})},
     "field scores: must hold exactly the samples"),
    ("unknown-field", lambda r: {**r, "meta": _meta(r, rank=[1, 1])}, "field meta.rank: is not a field"),
    ("summary-differs", lambda r: {**r, "judge": "gpt-4-0613 (verified)"}, "field judge: .* differs"),
    ("version-not-a-number", lambda r: {**r, "version": "1"}, "field version: must be a whole number"),
    ("meta-not-json", lambda r: {**r, "meta": "{"}, "field meta: is not JSON"),
    ("scores-nested-deep", lambda r: {**r, "scores": "[" * 100_000 + "]" * 100_000}, "field scores: is JSON nested"),
    ("verified-by-anyone", lambda r: {**r, "meta": _meta(r, provenance={"source": "graded", "verified_by": "me"})},
     "field meta.provenance.verified_by"),
]


@pytest.fixture(scope="module")
def backup_rows(tmp_path_factory) -> list[dict]:
    """Two lines of a real backup: 7b (one judge run) and 13b (three)."""
    tmp = tmp_path_factory.mktemp("backup")
    s = GradingService(ServiceSettings(data_dir=tmp / "data"))
    try:
        s.board.publish(opened(s, GRADES_7B_1RUN, "bob"), "7b", "", "bob", visitor="vb")
        s.board.publish(opened(s, GRADES_13B, "alice"), "13b", "", "alice", visitor="va")
        path = export_board(s.store, tmp / "export")
        return [json.loads(line) for line in path.read_text().splitlines()]
    finally:
        s.jobs.shutdown()
        s.store.close()


@pytest.mark.parametrize("tamper, message", [c[1:] for c in TAMPERED], ids=[c[0] for c in TAMPERED])
def test_import_refuses_a_tampered_file_and_writes_nothing(backup_rows, tmp_path, tamper, message):
    good, row = backup_rows
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / EXPORT_FILE).write_text(json.dumps(good) + "\n" + json.dumps(tamper(row)) + "\n")
    other = Store(tmp_path / "other.db")
    try:
        with pytest.raises(BoardError, match=f"^board.jsonl line 2, {message}"):
            import_board(other, tmp_path / "export")
        assert other.board_entries(include_withdrawn=True) == []
    finally:
        other.close()


def test_an_untampered_backup_imports(backup_rows, tmp_path):
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / EXPORT_FILE).write_text("".join(json.dumps(r) + "\n" for r in backup_rows))
    other = Store(tmp_path / "other.db")
    try:
        assert import_board(other, tmp_path / "export") == 2
    finally:
        other.close()


def test_import_refuses_a_look_alike_of_another_owners_name_and_duplicate_lines(svc, tmp_path):
    svc.board.publish(opened(svc, GRADES_13B, "alice"), "LLaVA-13B", "", "alice", visitor="va")
    path = export_board(svc.store, tmp_path / "export")
    row = json.loads(path.read_text())
    impostor = {**row, "entry_id": "impostor1", "owner_hash": owner_hash("mallory"), "name": "LLаVA-13B"}
    path.write_text(json.dumps(row) + "\n" + json.dumps(impostor) + "\n")
    with pytest.raises(BoardError, match="line 2, field name: .*looks the same"):
        import_board(svc.store, path.parent)
    path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(BoardError, match="line 2, field version: .* line 1 already"):
        import_board(svc.store, path.parent)


def test_a_bad_stored_row_is_skipped_and_named_in_the_log(svc, caplog):
    """Issue 26, attack 5: a row written around the import's checks (an old version, a hand-edited database)
    no longer takes the board, the API and MCP down: it is skipped and the host's log names it once."""
    good = svc.board.publish(opened(svc, GRADES_13B, "alice"), "13b", "", "alice", visitor="va")
    entry = load_entry(svc.store, good["entry"])
    for eid, meta in [("badrec", {**entry.meta, "capabilities": {**entry.meta["capabilities"], "rec": "lots"}}),
                      ("badruns", {**entry.meta, "runs": "many"}), ("badci", {**entry.meta, "ci": ["a", "b"]}),
                      ("badtotal", {**entry.meta, "total": None})]:
        svc.store.add_board_version(eid, run_id="r", owner_hash=owner_hash("m"), name=eid, link="", meta=meta,
                                    scores=entry.scores)
    svc.store.add_board_version("notjson", run_id="r", owner_hash=owner_hash("m"), name="x", link="",
                                meta={}, scores={})
    svc.store._exec("UPDATE board_versions SET meta = '{' WHERE entry_id = 'notjson'")
    svc.store.add_board_version("deep", run_id="r", owner_hash=owner_hash("m"), name="y", link="",
                                meta={}, scores={})
    svc.store._exec("UPDATE board_versions SET scores = ? WHERE entry_id = 'deep'", ("[" * 100_000 + "]" * 100_000,))
    svc.store.add_board_version("jslink", run_id="r", owner_hash=owner_hash("m"), name="z",
                                link="javascript:alert(1)", meta=entry.meta, scores=entry.scores)
    with caplog.at_level("WARNING"):
        table = svc.board.leaderboard_json({"references": False})
        svc.board.leaderboard_json({"references": False})
    assert [e["entry"] for e in table["entries"]] == [good["entry"]]
    skipped = [r.getMessage() for r in caplog.records if "skipped entry" in r.getMessage()]
    assert sorted(m.split("'")[1] for m in skipped) == ["badci", "badrec", "badruns", "badtotal", "deep", "jslink",
                                                         "notjson"]
    assert any("meta.capabilities.rec" in m for m in skipped)
    with pytest.raises(ServiceError, match="No such"):
        svc.board.board_entry("badrec")
    out = export_board(svc.store, svc.settings.data_dir / "backup")         # the backup still holds them
    assert out.read_text().count("\n") == 8


@pytest.mark.parametrize("seed, shared", [(0, True), (1, True), (2, False), (3, False)],
                         ids=["shared-difficulty-0", "shared-difficulty-1", "independent-2", "independent-3"])
def test_pruned_ranks_equal_counting_every_draw(seed, shared):
    """Cantelli's inequality only skips pairs whose answer it proves: the ranks equal those of the plain count,
    ties (duplicated entries) included."""
    rng = np.random.default_rng(seed)
    level = rng.random(60)[None, :] if shared else 0.5
    table = np.clip(np.round(level * rng.uniform(0.2, 1.6, (40, 1)) + rng.normal(0, 0.3, (40, 60)), 1), 0, 1)
    table = np.vstack([table, table[:5]])
    assert rank_bounds(table, resamples=400) == rank_bounds(table, resamples=400, prune=False)


def test_a_published_run_never_expires_and_unpublishing_lets_it_expire_again(svc):
    """Issue 20's expiry spares published runs (issue 18): publishing pins the run, unpublishing unpins it."""
    run = opened(svc, GRADES_13B, "alice")
    entry = svc.board.publish(run, "13b", "", "alice", visitor="va")["entry"]
    assert run in svc.store.protected_run_ids()
    svc.board.unpublish(entry, "alice", visitor="va")
    assert run not in svc.store.protected_run_ids()
    svc.board.restore_entry(entry, "alice", visitor="va")
    assert run in svc.store.protected_run_ids()
