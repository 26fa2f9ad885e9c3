"""Bounded storage (issue 20, hole 2), in the core: every run's predictions capped with their original lengths kept,
per-visitor quotas, expiry of unopened runs (pinned and host-key runs kept), the free-disk floor, My runs from one
light query, status once per change, and a write fault that neither leaves ``running`` on disk nor answers a
generic error. The attacks against the running app are in tests/test_app_hostile.py."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from mmvet_core.hosting.keeping import RunKeeper, StorageLimits, cap_predictions
from mmvet_core.service import (BENCH_BUNDLED, JUDGE_BASELINE, BenchmarkChoice, GradingService, JudgeChoice,
                                ServiceError, ServiceSettings)
from mmvet_core.store import Store, StoreError

RESULTS = Path(__file__).resolve().parent / "data" / "results" / "llava-v1.5-13b.json"
GRADES = Path(__file__).resolve().parent / "data" / "official-grades"
ALL = BenchmarkChoice(BENCH_BUNDLED)


@pytest.fixture
def svc(tmp_path):
    s = GradingService(ServiceSettings(data_dir=tmp_path / "data"))
    yield s
    s.jobs.shutdown()
    s.store.close()


def wait_done(svc: GradingService, run_id: str, timeout: float = 180.0) -> dict:
    deadline = time.time() + timeout
    while svc.jobs.is_running(run_id):
        assert time.time() < deadline, "the run did not end"
        time.sleep(0.02)
    return svc.reading.status(run_id)


def padded(tmp_path: Path, chars: int, every: int = 1) -> str:
    preds = json.loads(RESULTS.read_text(encoding="utf-8"))
    path = tmp_path / "padded.json"
    path.write_text(json.dumps({k: (v + " " + "x" * chars if i % every == 0 else v)
                                for i, (k, v) in enumerate(preds.items())}), encoding="utf-8")
    return str(path)


def add_run(store: Store, owner: str = "o", preds: dict | None = None) -> str:
    return store.create_run(model_name="m", benchmark={"name": "MM-Vet", "samples": {}}, n_runs=1,
                            judge={"model": "j"}, predictions=preds or {"v1_0": "a"}, owner=owner)


# --- the prediction cap -----------------------------------------------------------------------------------
@pytest.mark.parametrize("preds, limit, cut", [
    ({"a": "x" * 10, "b": "ok"}, 5, {"a": 10}),
    ({"a": "x" * 5}, 5, None),                    # exactly the cap: untouched
    ({"a": "x" * 10}, 0, None),                   # 0: no cap
], ids=["over", "at-cap", "no-cap"])
def test_cap_predictions(preds, limit, cut):
    capped, info = cap_predictions(preds, limit)
    assert (info or {}).get("lengths") == cut
    assert all(len(p) <= (limit or 10**9) for p in capped.values())
    assert capped.keys() == preds.keys()


def test_a_free_run_of_huge_predictions_is_capped_and_its_card_says_so(svc, tmp_path):
    run_id, _ = svc.runs.start(padded(tmp_path, 200_000, every=2), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me",
                          visitor="v")
    st = wait_done(svc, run_id)
    run = svc.store.get_run(run_id)
    assert max(len(p) for p in run.predictions.values()) == 8000
    assert st["status"] == "done" and st["done"] == 218
    assert st["card"]["predictions_cut"].startswith("109 predictions cut to 8,000 characters")
    assert run.judge["predictions_cut"]["longest"] > 200_000          # the original length is kept
    _, stored = svc.store.visitor_storage("v")
    assert stored < 3_000_000


# --- quotas, disk -----------------------------------------------------------------------------------------
def test_a_visitor_over_their_quota_of_runs_or_bytes_is_refused(svc, tmp_path):
    svc.limits.keeper.limits = StorageLimits(runs_per_visitor=2, mb_per_visitor=0)
    for _ in range(2):
        wait_done(svc, svc.runs.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")[0])
    with pytest.raises(ServiceError, match="You keep 2 runs here, the most allowed per visitor"):
        svc.runs.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    # another visitor is not charged for them; deleting one frees a place
    wait_done(svc, svc.runs.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="you", visitor="w")[0])
    svc.runs.delete(svc.reading.runs_of("me")[0].id, "me")
    svc.runs.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    svc.limits.keeper.limits = StorageLimits(runs_per_visitor=0, mb_per_visitor=1)
    with pytest.raises(ServiceError, match="the most allowed per visitor is 1 MB"):
        svc.runs.start(padded(tmp_path, 20_000), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")


def test_new_work_is_refused_before_the_disk_is_full(svc, tmp_path):
    svc.limits.keeper.limits = StorageLimits(min_free_mb=10**9)          # a floor above any real free space
    with pytest.raises(ServiceError, match="disk is almost full"):
        svc.runs.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    with pytest.raises(ServiceError, match="disk is almost full"):
        svc.runs.open_grade_file(str(GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json"), ALL, "me", "v")
    assert svc.store.run_summaries("me") == []


# --- expiry -----------------------------------------------------------------------------------------------
def test_runs_nobody_opened_expire_but_pinned_host_and_cli_runs_stay(tmp_path):
    store = Store(tmp_path / "db.sqlite")
    gone_files = []
    keeper = RunKeeper(store, StorageLimits(expire_days=30), tmp_path, on_expire=gone_files.append)
    old, opened, pinned, host, cli, running = (add_run(store) for _ in range(6))
    store._exec("UPDATE runs SET owner = '' WHERE id = ?", (cli,))
    for rid in (old, opened, pinned, host, cli, running):
        keeper.stored(rid, "v", host=rid == host)
    long_ago = time.time() - 31 * 86400
    for rid in (old, opened, pinned, host, cli, running):
        store.touch_run(rid, long_ago)
    store._exec("UPDATE runs SET updated_at = ?", (long_ago,))
    keeper._touched.clear()
    keeper.opened(opened)                       # a share-link viewer opened it today
    store.pin_run(pinned, "published")
    assert keeper.expire(running=[running]) == [old]
    assert gone_files == [old] and store.get_run(old) is None
    assert {r["id"] for r in store.run_summaries("o")} == {opened, pinned, host, running}
    assert store.protected_run_ids() == {pinned, host}
    store.unpin_run(pinned, "published")
    assert keeper.expire(running=[running]) == [pinned]
    assert RunKeeper(store, StorageLimits(expire_days=0), tmp_path).expire() == []     # 0: never
    store.close()


# --- My runs, status ---------------------------------------------------------------------------------------
def test_my_runs_reads_no_run_twice(svc, tmp_path, monkeypatch):
    """The list's totals are kept once computed: a second listing loads no run at all."""
    rid = svc.runs.open_grade_file(str(GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json"), ALL, "me", "v")
    first = svc.reading.runs_of("me")
    import mmvet_core.service.reading as service
    loads = []
    monkeypatch.setattr(service, "load_run_view", lambda *a, **k: loads.append(a) or None)
    again = svc.reading.runs_of("me")
    assert loads == [] and again == first and first[0].id == rid and first[0].total is not None
    svc.runs.rename(rid, "me", "renamed")                 # a change makes the kept total stale
    monkeypatch.undo()
    assert svc.reading.runs_of("me")[0].total == first[0].total and svc.reading.runs_of("me")[0].model == "renamed"


def test_status_is_computed_once_per_change_whoever_asks(svc, monkeypatch):
    rid = svc.runs.open_grade_file(str(GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json"), ALL, "me", "v")
    import mmvet_core.service.reading as service
    real, loads = service.load_run_view, []
    monkeypatch.setattr(service, "load_run_view", lambda *a, **k: loads.append(a) or real(*a, **k))
    answers = [svc.reading.status(rid) for _ in range(50)]
    assert len(loads) == 1 and all(a == answers[0] for a in answers)
    svc.runs.override(rid, "me", "v1_0", 1.0, "checked by hand")
    loads.clear()
    assert svc.reading.status(rid)["scores"] != answers[0]["scores"] and len(loads) == 1


# --- a write fault ------------------------------------------------------------------------------------------
def test_a_write_fault_is_named_and_the_row_on_disk_ends_failed(svc, tmp_path, monkeypatch):
    # /grade while the database refuses writes: a named refusal, not a generic error
    monkeypatch.setattr(svc.store, "create_run", lambda **k: (_ for _ in ()).throw(
        StoreError("the server could not write to its database: the disk holding the database is full")))
    with pytest.raises(ServiceError, match="could not be stored: .*disk holding the database is full"):
        svc.runs.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    monkeypatch.undo()
    # a run whose grade writes fail ends failed; the status write fails too, and is written once writes work again
    real_put, real_set = svc.store.put_grade, svc.store.set_status
    full = {"on": True}

    def put_grade(row):
        raise StoreError("the server could not write to its database: the disk holding the database is full")

    def set_status(run_id, status, message=""):
        if full["on"] and status != "running":
            raise StoreError("the server could not write to its database: the disk holding the database is full")
        real_set(run_id, status, message)

    monkeypatch.setattr(svc.store, "put_grade", put_grade)
    monkeypatch.setattr(svc.store, "set_status", set_status)
    rid, _ = svc.runs.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    st = wait_done(svc, rid)
    assert st["status"] == "failed" and "disk holding the database is full" in st["message"]
    assert svc.store.get_run(rid).status == "running"        # the disk is still full
    full["on"] = False
    monkeypatch.setattr(svc.store, "put_grade", real_put)
    svc.reading.status(rid)
    on_disk = Store(svc.store.path).get_run(rid)
    assert on_disk.status == "failed" and "disk holding the database is full" in on_disk.message


def test_pages_share_one_view_per_change_of_the_run(svc):
    rid = svc.runs.open_grade_file(str(GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json"), ALL, "me", "v")
    first = svc.reading.view(rid)
    assert svc.reading.view(rid) is first                                    # fifty viewers: one read
    svc.runs.override(rid, "me", "v1_0", 0.0, "wrong")
    changed = svc.reading.view(rid)
    assert changed is not first and changed.overrides == {"v1_0": (0.0, "wrong")}
    assert svc.reading.view(rid, evidence_for="v1_0").grades[("v1_0", 0)].attempts     # evidence is never shared
    svc.runs.delete(rid, "me")
    assert svc.reading.view(rid) is None


def test_the_version_open_pages_follow_changes_with_the_run_and_is_read_once_for_all(svc, monkeypatch):
    rid = svc.runs.open_grade_file(str(GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json"), ALL, "me", "v")
    reads = []
    real = svc.store.change_stamp
    monkeypatch.setattr(svc.store, "change_stamp", lambda r: reads.append(r) or real(r))
    first = svc.reading.run_version(rid, max_age=0)
    assert {svc.reading.run_version(rid, max_age=60) for _ in range(50)} == {first} and len(reads) == 1
    svc.runs.rename(rid, "me", "another name")
    assert svc.reading.run_version(rid, max_age=0) != first
    assert svc.reading.run_version("no-such-run") is None
