"""The leaderboard (`mmvet_core.leaderboard` and its rules in `GradingService`): rank groups on hand-built score
tables, frozen copies and versions, who may do what, the publish rate limit, bounded inert names and links,
deep links, downloads, export / import."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from mmvet_core import leaderboard as lb
from mmvet_core.service import BenchmarkChoice, GradingService, ServiceError, ServiceSettings

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
    assert lb.rank_bounds(np.vstack(table)) == expected


def test_ranks_are_reproducible_and_paired():
    """Seeded: the same answer every time. Paired: +5 points won on 5 samples and lost on none is significant
    (a draw without any of the 5 has probability 0.95^100 = 0.6 %), though the two separate intervals overlap
    widely; +2 points on 2 samples is not (0.98^100 = 13 % of the draws show no difference)."""
    base = ones(range(0, 40))
    assert lb.rank_bounds(np.vstack([base, ones(range(0, 45))])) == [(2, 2), (1, 1)]
    assert lb.rank_bounds(np.vstack([base, ones(range(0, 42))])) == [(1, 2), (1, 2)]
    borderline = np.vstack([base, ones(range(0, 43)), ones(range(0, 44))])
    assert len({tuple(lb.rank_bounds(borderline)) for _ in range(3)}) == 1


def entry(eid: str, scores: np.ndarray, *, judge="gpt-4-0613", kind="official", bench="v1", sha="s") -> lb.BoardEntry:
    ids = [f"v1_{i}" for i in range(len(scores))]
    meta = {"judge": judge, "judge_key": lb.judge_key(judge, kind), "judge_kind": kind, "benchmark": bench,
            "benchmark_label": bench, "samples_sha": sha, "sample_ids": ids, "runs": 1,
            "total": 100 * float(np.mean(scores)), "ci": [None, None], "capabilities": {}, "integrations": {},
            "date": "2026-12-04"}
    return lb.BoardEntry(eid, 1, "run", "", eid, "", True, False, 0.0, meta,
                         {sid: [float(s)] for sid, s in zip(ids, scores)})


def test_different_judges_benchmarks_or_samples_are_never_ranked_together():
    entries = [entry("a", A), entry("c", C),                     # one group: A beats C
               entry("c-4o", C, judge="gpt-4o", kind="successor"),     # alone: another judge
               entry("a-v2", A, bench="v2"),                     # alone: another benchmark
               entry("a-other", A, sha="t")]                     # alone: other samples under the same ids
    ranks = lb.rank_groups(entries)
    assert ranks == {"a": (1, 1, 2), "c": (2, 2, 2), "c-4o": (1, 1, 1), "a-v2": (1, 1, 1), "a-other": (1, 1, 1)}


def test_gpt_4_and_gpt_4_0613_are_one_official_judge():
    assert lb.judge_key("gpt-4", "official") == lb.judge_key("gpt-4-0613", "official") == "gpt-4-0613"
    assert lb.judge_key("gpt-4o", "successor") == "gpt-4o"


# --- what a visitor types ---------------------------------------------------------------------------------------
NAME_CASES = [
    ("plain", "LLaVA-1.5 13b", "LLaVA-1.5 13b"),
    ("script-stays-text", "<script>alert(1)</script>", "<script>alert(1)</script>"),
    ("newlines-collapsed", "a\nb\r\nc", "a b c"),
    ("bidi-override-removed", "evil\u202egnp.exe", "evil gnp.exe"),
    ("zero-width-removed", "a\u200bb", "a b"),
    ("trimmed", "   x   ", "x"),
]


@pytest.mark.parametrize("raw, clean", [c[1:] for c in NAME_CASES], ids=[c[0] for c in NAME_CASES])
def test_display_names_are_one_line_of_text(raw, clean):
    assert lb.clean_display_name(raw) == clean


@pytest.mark.parametrize("raw", ["", "   ", "\u202e", "x" * (lb.MAX_DISPLAY_NAME + 1)], ids=["empty", "blank", "only-bidi", "too-long"])
def test_bad_display_names_are_refused(raw):
    with pytest.raises(lb.BoardError):
        lb.clean_display_name(raw)


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
    ("too-long", "https://x.org/" + "a" * lb.MAX_LINK),
    ("https-then-javascript", "https:javascript:alert(1)"),
]


@pytest.mark.parametrize("url", [c[1] for c in LINK_REFUSED], ids=[c[0] for c in LINK_REFUSED])
def test_links_other_than_plain_https_are_refused(url):
    with pytest.raises(lb.BoardError):
        lb.check_link(url)


def test_https_links_and_no_link_are_accepted():
    assert lb.check_link("https://huggingface.co/liuhaotian/llava-v1.5-13b") == \
        "https://huggingface.co/liuhaotian/llava-v1.5-13b"
    assert lb.check_link(None) == ""


def test_csv_download_neutralises_formulas():
    row = lb.board_rows([entry("e1", A)], {})[0]
    row.name = "=HYPERLINK(\"https://evil\",\"click\")"
    parsed = list(csv.reader(io.StringIO(lb.rows_csv([row]))))
    assert parsed[0][:3] == ["rank", "name", "judge"]
    assert parsed[1][1] == "'=HYPERLINK(\"https://evil\",\"click\")"


DEEP_LINKS = [
    ("round-trip", "judge=gpt-4o&benchmark=v1&q=llava&sort=total&desc=1",
     lb.BoardFilter("gpt-4o", "v1", "llava", "total", True, True)),
    ("unknown-sort-ignored", "sort=__class__&refs=0", lb.BoardFilter(sort="rank", references=False)),
    ("garbage", "%%%&&==;<script>", lb.BoardFilter()),
    ("bounded", "q=" + "x" * 5000, lb.BoardFilter(query="x" * 80)),
]


@pytest.mark.parametrize("text, expected", [c[1:] for c in DEEP_LINKS], ids=[c[0] for c in DEEP_LINKS])
def test_deep_link_filters(text, expected):
    assert lb.filter_from_query(text) == expected
    assert lb.filter_from_query(lb.filter_to_query(expected)) == expected


def test_filter_and_sort_rows():
    rows = lb.board_rows([entry("a", A), entry("c", C), entry("b4o", B, judge="gpt-4o", kind="successor")],
                         lb.rank_groups([entry("a", A), entry("c", C)])) + lb.paper_rows()
    names = lambda f: [r.name for r in lb.filter_rows(rows, f)]     # noqa: E731
    assert names(lb.BoardFilter(references=False)) == ["a", "c", "b4o"]
    assert names(lb.BoardFilter(judge="successor")) == ["b4o"]
    assert names(lb.BoardFilter(judge="official", references=False)) == ["a", "c"]
    assert names(lb.BoardFilter(sort="total", references=False)) == ["c", "b4o", "a"]
    assert names(lb.BoardFilter(sort="total", descending=True, references=False)) == ["a", "b4o", "c"]
    refs = lb.filter_rows(rows, lb.BoardFilter(benchmark="v1-bard"))
    assert refs and all(r.reference and r.rank is None and r.cells()[0] == "ref" for r in refs)
    assert "Bard" in refs[0].benchmark_label and refs[0].judge == "gpt-4-0613 (paper)"


# --- the service's rules ----------------------------------------------------------------------------------------
@pytest.fixture
def svc(tmp_path):
    s = GradingService(ServiceSettings(data_dir=tmp_path / "data", host_secret="host-secret-123",
                                       publish_per_hour=3))
    yield s
    s.jobs.shutdown()
    s.store.close()


def opened(svc: GradingService, path: Path, owner: str, subset: str = "All samples") -> str:
    """A finished run of `owner`: the official grades of a reference model (no judge call)."""
    return svc.open_grade_file(str(path), BenchmarkChoice(subset=subset), owner)


def test_publish_freezes_the_scores_and_republish_is_a_new_version(svc):
    run = opened(svc, GRADES_13B, "alice")
    row = svc.publish(run, "LLaVA-1.5 13b", "https://github.com/haotian-liu/LLaVA", "alice", visitor="va")
    assert (row["name"], row["total"], row["judge_kind"], row["benchmark"], row["runs"], row["version"]) == \
        ("LLaVA-1.5 13b", 36.3, "official", "v1", 3, 1)
    assert row["ci"] == [30.7, 42.0] and row["rank"] == [1, 1]
    detail = svc.board_entry(row["entry"])
    assert len(detail["samples"]) == 218 and detail["samples"][0]["id"] == "v1_0"
    frozen = {s["id"]: s["scores"] for s in detail["samples"]}

    svc.override(run, "alice", "v1_0", 1.0 if frozen["v1_0"][0] < 1 else 0.0, "a human grade")
    assert svc.board_entry(row["entry"])["row"]["total"] == 36.3         # the board did not move
    assert svc.entry_of_run(run, "alice")["stale"] is True
    with pytest.raises(ServiceError, match="already on the board"):
        svc.publish(run, "again", "", "alice", visitor="va")
    again = svc.publish(run, "LLaVA-1.5 13b", "", "alice", visitor="va", republish=True)
    assert again["entry"] == row["entry"] and again["version"] == 2 and again["total"] != 36.3
    assert svc.board_entry(row["entry"])["versions"] == [1, 2]

    svc.delete(run, "alice")                                             # the run is gone, the entry stays
    assert svc.board_entry(row["entry"])["row"]["version"] == 2
    assert [r.name for r in svc.leaderboard({"references": False})] == ["LLaVA-1.5 13b"]


def test_only_finished_runs_are_published(svc, tmp_path):
    grades = json.loads(GRADES_7B_1RUN.read_text())
    partial = tmp_path / "llava-v1.5-7b-partial_gpt-4-grade-1runs.json"
    partial.write_text(json.dumps(dict(list(grades.items())[:100])))
    run = opened(svc, partial, "alice")
    with pytest.raises(ServiceError, match="finished run"):
        svc.publish(run, "partial", "", "alice", visitor="va")


def test_nobody_but_the_owner_publishes_renames_or_unpublishes(svc):
    run = opened(svc, GRADES_13B, "alice")
    for who in ("mallory", ""):
        with pytest.raises(ServiceError, match="owner"):
            svc.publish(run, "stolen", "", who, visitor="vm")
    entry = svc.publish(run, "LLaVA 13b", "", "alice", visitor="va")["entry"]
    for who in ("mallory", ""):
        with pytest.raises(ServiceError, match="owner"):
            svc.rename_entry(entry, who, "pwned")
        with pytest.raises(ServiceError, match="owner"):
            svc.unpublish(entry, who)
    assert svc.board_entry(entry)["row"]["name"] == "LLaVA 13b"

    assert svc.rename_entry(entry, "alice", "LLaVA-1.5 13b", "https://x.org/card")
    assert (svc.board_entry(entry)["row"]["name"], svc.board_entry(entry)["row"]["link"]) == \
        ("LLaVA-1.5 13b", "https://x.org/card")
    with pytest.raises(ServiceError, match="https"):
        svc.rename_entry(entry, "alice", "ok", "javascript:alert(1)")
    svc.unpublish(entry, "alice")
    assert svc.leaderboard({"references": False}) == []
    with pytest.raises(ServiceError, match="No such"):
        svc.board_entry(entry)
    svc.restore_entry(entry, "alice")
    assert [r.entry for r in svc.leaderboard({"references": False})] == [entry]


def test_the_host_hides_any_entry_with_the_secret_only(svc, tmp_path):
    entry = svc.publish(opened(svc, GRADES_13B, "alice"), "LLaVA 13b", "", "alice", visitor="va")["entry"]
    for secret in ("", "wrong", "host-secret-12", None):
        with pytest.raises(ServiceError, match="host"):
            svc.hide_entry(entry, secret)
    with pytest.raises(ServiceError, match="owner"):
        svc.unpublish(entry, "host-secret-123")             # the secret is not an owner token
    svc.hide_entry(entry, "host-secret-123")
    assert svc.leaderboard({"references": False}) == []
    svc.restore_entry(entry, "alice")                       # the owner cannot undo the host's hiding
    assert svc.leaderboard({"references": False}) == []
    svc.hide_entry(entry, "host-secret-123", hidden=False)
    assert len(svc.leaderboard({"references": False})) == 1
    no_secret = GradingService(ServiceSettings(data_dir=tmp_path / "other"))
    try:
        with pytest.raises(ServiceError, match="host"):
            no_secret.hide_entry(entry, "")                 # no secret configured: no host control at all
    finally:
        no_secret.store.close()


def test_publishing_is_rate_limited_per_visitor(svc):
    runs = [opened(svc, p, "alice") for p in (GRADES_13B, GRADES_7B, GRADES_7B_1RUN)]
    svc.publish(runs[0], "one", "", "alice", visitor="va")
    svc.publish(runs[0], "one", "", "alice", visitor="va", republish=True)
    svc.publish(runs[1], "two", "", "alice", visitor="va")
    with pytest.raises(ServiceError, match="3 times in the last hour"):
        svc.publish(runs[2], "three", "", "alice", visitor="va")
    svc.publish(runs[2], "three", "", "alice", visitor="another address")     # per visitor
    with pytest.raises(ServiceError, match="No run"):
        svc.publish("no-such-run", "x", "", "alice", visitor="vz")           # refusals cost nothing
    assert svc.store.count_publishes("vz", 0) == 0


def test_names_and_links_are_validated_before_anything_is_stored(svc):
    run = opened(svc, GRADES_13B, "alice")
    for name, link, message in [("", "", "display name"), ("x" * 81, "", "80"),
                                ("ok", "javascript:alert(1)", "https"), ("ok", "data:text/html,x", "https")]:
        with pytest.raises(ServiceError, match=message):
            svc.publish(run, name, link, "alice", visitor="va")
    assert svc.store.board_entries(include_withdrawn=True) == []
    row = svc.publish(run, "<img src=x onerror=alert(1)>", "", "alice", visitor="va")
    assert row["name"] == "<img src=x onerror=alert(1)>"        # kept as text; every view shows it as text


def test_13b_and_7b_are_two_rank_groups_and_the_paper_rows_are_references(svc):
    svc.publish(opened(svc, GRADES_13B, "alice"), "13b", "", "alice", visitor="va")
    svc.publish(opened(svc, GRADES_7B, "bob"), "7b", "", "bob", visitor="vb")
    svc.publish(opened(svc, GRADES_7B_1RUN, "bob", "Bard set (168)"), "7b bard", "", "bob", visitor="vb")
    table = svc.leaderboard_json("benchmark=v1")
    ranked = [(e["name"], e["rank"]) for e in table["entries"] if not e["reference"]]
    assert ranked == [("13b", [1, 1]), ("7b", [2, 2])]
    refs = [e for e in table["entries"] if e["reference"]]
    assert {e["judge"] for e in refs} == {"gpt-4-0613 (paper)"} and all(e["rank"] is None for e in refs)
    assert any(e["name"] == "LLaVA-13B (LLaMA-2) (paper)" and e["total"] == 32.9 for e in refs)
    bard = svc.leaderboard_json({"benchmark": "v1-bard", "references": False})["entries"]
    assert [(e["name"], e["rank"]) for e in bard] == [("7b bard", [1, 1])]      # never ranked with the full set


# --- export / import --------------------------------------------------------------------------------------------
def test_export_is_a_dataset_folder_and_import_round_trips(svc, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    run = opened(svc, GRADES_13B, "alice")
    e13 = svc.publish(run, "13b", "https://x.org", "alice", visitor="va")["entry"]
    svc.override(run, "alice", "v1_1", 1.0, "human")
    svc.publish(run, "13b", "https://x.org", "alice", visitor="va", republish=True)
    e7 = svc.publish(opened(svc, GRADES_7B, "bob"), "7b", "", "bob", visitor="vb")["entry"]
    svc.unpublish(e7, "bob")
    out = tmp_path / "board-export"
    lb.export_board(svc.store, out)

    import datasets
    ds = datasets.load_dataset(str(out), split="train")
    assert ds.num_rows == 3
    assert sorted((r["entry_id"], r["version"], r["current"], r["published"]) for r in ds) == sorted(
        [(e13, 1, False, True), (e13, 2, True, True), (e7, 1, True, False)])
    assert "owner_hash" in ds.column_names and "alice" not in json.dumps(ds.to_list())

    fresh = GradingService(ServiceSettings(data_dir=tmp_path / "restored"))
    try:
        assert lb.import_board(fresh.store, out) == 3
        assert fresh.leaderboard_json({"references": False}) == svc.leaderboard_json({"references": False})
        for eid in (e13, e7):
            a, b = lb.load_entry(svc.store, eid), lb.load_entry(fresh.store, eid)
            assert (a.version, a.name, a.link, a.published, a.hidden, a.meta, a.scores) == \
                (b.version, b.name, b.link, b.published, b.hidden, b.meta, b.scores)
        fresh.restore_entry(e7, "bob")          # ownership survives the round trip (through the hash)
        with pytest.raises(ServiceError, match="owner"):
            fresh.unpublish(e13, "bob")
        lb.export_board(fresh.store, tmp_path / "again")
        assert (tmp_path / "again" / lb.EXPORT_FILE).read_text().count("\n") == 3
    finally:
        fresh.store.close()


@pytest.mark.parametrize("tamper, message", [
    (lambda r: {**r, "name": "\u202e"}, "display name"),
    (lambda r: {**r, "link": "javascript:alert(1)"}, "https"),
    (lambda r: {**r, "meta": json.dumps({**json.loads(r["meta"]), "total": 99.0})}, "not what its scores give"),
    (lambda r: {**r, "scores": json.dumps({"v1_0": [7.0]})}, r"\[0, 1\]"),
], ids=["bidi-name", "javascript-link", "inflated-total", "score-out-of-range"])
def test_import_refuses_a_tampered_file_and_writes_nothing(svc, tmp_path, tamper, message):
    svc.publish(opened(svc, GRADES_13B, "alice"), "13b", "", "alice", visitor="va")
    out = tmp_path / "export"
    path = lb.export_board(svc.store, out)
    row = json.loads(path.read_text())
    path.write_text(json.dumps(tamper(row)) + "\n")
    other = GradingService(ServiceSettings(data_dir=tmp_path / "other"))
    try:
        with pytest.raises(lb.BoardError, match=message):
            lb.import_board(other.store, out)
        assert other.store.board_entries(include_withdrawn=True) == []
    finally:
        other.store.close()


@pytest.mark.parametrize("seed, shared", [(0, True), (1, True), (2, False), (3, False)],
                         ids=["shared-difficulty-0", "shared-difficulty-1", "independent-2", "independent-3"])
def test_pruned_ranks_equal_counting_every_draw(seed, shared):
    """Cantelli's inequality only skips pairs whose answer it proves: the ranks equal those of the plain count,
    ties (duplicated entries) included."""
    rng = np.random.default_rng(seed)
    level = rng.random(60)[None, :] if shared else 0.5
    table = np.clip(np.round(level * rng.uniform(0.2, 1.6, (40, 1)) + rng.normal(0, 0.3, (40, 60)), 1), 0, 1)
    table = np.vstack([table, table[:5]])
    assert lb.rank_bounds(table, resamples=400) == lb.rank_bounds(table, resamples=400, prune=False)


def test_a_published_run_never_expires_and_unpublishing_lets_it_expire_again(svc):
    """Issue 20's expiry spares published runs (issue 18): publishing pins the run, unpublishing unpins it."""
    run = opened(svc, GRADES_13B, "alice")
    entry = svc.publish(run, "13b", "", "alice", visitor="va")["entry"]
    assert run in svc.store.protected_run_ids()
    svc.unpublish(entry, "alice")
    assert run not in svc.store.protected_run_ids()
    svc.restore_entry(entry, "alice")
    assert run in svc.store.protected_run_ids()
