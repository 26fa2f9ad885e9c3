"""Issue 17, parts 1-2, as a user meets them: ``grade`` with the official judge after OpenAI shut it down, a judge
with an announced shutdown, and ``judges`` (the commands in this process, tests/cli_run.py, against the fake
judge server)."""

import pytest

from mmvet_core.judging.judge import JudgeSettings
from mmvet_core.successors.judgecheck import check_settings
from mmvet_core.store import Store
from tests.fake_judge import FakeJudgeServer, FakeState
from tests.test_cli import SHARED, run_cli

RESULTS = SHARED / "results" / "llava-v1.5-13b.json"
NO_ENV = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "sk-test"}


def subset_file(tmp_path, ids=("v1_0", "v1_1", "v1_2")):
    path = tmp_path / "ids.txt"
    path.write_text("\n".join(ids), encoding="utf-8")
    return path


@pytest.mark.parametrize("listed, judge_args, at_most", [
    pytest.param(True, (), 0, id="default-judge-listed-endpoint"),
    pytest.param(False, (), 1, id="default-judge-endpoint-without-model-list"),
    pytest.param(True, ("--judge-model", "gpt-4"), 0, id="gpt-4-alias"),
])
def test_grade_with_the_shut_down_official_judge_stops_before_paying_and_lists_the_served_judges(
        tmp_path, listed, judge_args, at_most):
    """Before: 32 calls to the dead judge and "the endpoint does not serve this model (HTTP 404)"."""
    with FakeJudgeServer(FakeState.after_gpt4(listed=listed)) as judge:
        proc = run_cli("grade", RESULTS, "--base-url", judge.url, *judge_args, "--out", tmp_path / "out",
                       "--db", tmp_path / "g.db", env=NO_ENV)
        dead = [c for c in judge.state.chat_calls() if c["model"] in ("gpt-4-0613", "gpt-4")]
        others = [c for c in judge.state.chat_calls() if c["model"] not in ("gpt-4-0613", "gpt-4")]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(dead) <= at_most and not others            # no judge was substituted
    err = " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr
    assert "shut down by OpenAI on 2026-10-23" in err
    assert "the official MM-Vet metric can no longer be recomputed" in err
    assert "Recorded official grades stay valid" in err and "judge-check" in err
    if listed:
        assert "judge-b (shutdown 2026-12-11), judge-c" in err
        assert "text-embedding" not in err                  # chat models only
    else:
        assert "does not list its models" in err
    assert not (tmp_path / "out").exists()


def test_the_official_judge_on_an_endpoint_that_still_serves_it_grades_as_today(tmp_path):
    with FakeJudgeServer() as judge:                       # lists gpt-4-0613 (a proxy, a dedicated deployment)
        proc = run_cli("grade", RESULTS, "--base-url", judge.url, "--subset", subset_file(tmp_path),
                       "--out", tmp_path / "out", "--db", tmp_path / "g.db", env=NO_ENV)
        answered = len(judge.state.completed_calls())
    assert proc.returncode == 0, proc.stderr
    assert answered >= 3
    assert "OpenAI shut down gpt-4-0613 on 2026-10-23; this endpoint still serves it" in proc.stderr
    assert "Total:" in proc.stdout


def test_a_judge_with_an_announced_shutdown_is_flagged_at_start_and_the_date_is_recorded_with_the_run(tmp_path):
    with FakeJudgeServer(FakeState.after_gpt4()) as judge:
        proc = run_cli("grade", RESULTS, "--base-url", judge.url, "--judge-model", "judge-b",
                       "--subset", subset_file(tmp_path), "--out", tmp_path / "out", "--db", tmp_path / "g.db",
                       env=NO_ENV)
    assert proc.returncode == 0, proc.stderr
    paragraph = proc.stdout.split("Note:", 1)[1].split("\n\n")[0]        # (wrapped at 100 columns)
    note = " ".join(x.strip() for x in paragraph.splitlines())
    assert "judge-b" in note and "2026-12-11" in note and "stored grades stay viewable and exportable" in note
    store = Store(tmp_path / "g.db")
    (run,) = store.list_runs("")
    assert run.judge["shutdown_date"] == "2026-12-11"
    assert run.status == "done"


def test_judges_lists_the_served_chat_models_with_their_dates_and_a_stored_check(tmp_path):
    with FakeJudgeServer(FakeState.after_gpt4()) as judge:
        db = tmp_path / "g.db"
        store = Store(db)
        checked = check_settings(JudgeSettings(model="judge-c", base_url=judge.url))
        store.put_judge_check(checked.fingerprint(), checked.to_dict(),
                              {"columns": [{"name": "total", "delta_bar": 0.0523, "shift": 1.26}], "close": False})
        store.close()
        proc = run_cli("judges", "--base-url", judge.url, "--db", db, env=NO_ENV)
        calls = judge.state.chat_calls()
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith("  judge-")}
    assert set(rows) == {"judge-b", "judge-c"}
    assert "2026-12-11" in rows["judge-b"] and "not checked" in rows["judge-b"]
    assert "—" in rows["judge-c"] and "Δ̄ 0.052, total shift +1.3" in rows["judge-c"]
    assert "text-embedding" not in proc.stdout
    assert "The official judge gpt-4-0613 (shut down by OpenAI on 2026-10-23) is not among them" in proc.stdout
    assert calls == []                                     # listing costs no judge call


def test_judges_on_an_endpoint_without_a_model_list_says_so_and_exits_1(tmp_path):
    with FakeJudgeServer(FakeState.after_gpt4(listed=False)) as judge:
        proc = run_cli("judges", "--base-url", judge.url, "--db", tmp_path / "g.db", env=NO_ENV)
    assert proc.returncode == 1
    assert "has no readable model list (the endpoint has no model list (HTTP 404))" in " ".join(proc.stdout.split())
    assert "Traceback" not in proc.stderr


def test_judges_lists_azure_deployments(tmp_path):
    with FakeJudgeServer(FakeState.after_gpt4()) as judge:
        env = {**NO_ENV, "AZURE_OPENAI_ENDPOINT": judge.url.removesuffix("/v1"), "AZURE_OPENAI_API_KEY": "k",
               "OPENAI_API_VERSION": "2024-02-01"}
        proc = run_cli("judges", "--azure", "--db", tmp_path / "g.db", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Azure deployments" in proc.stdout and "judge-b" in proc.stdout and "judge-c" in proc.stdout


def test_help_texts_say_the_default_judge_is_shut_down():
    proc = run_cli("grade", "--help")
    assert "shut down by OpenAI on 2026-10-23" in " ".join(proc.stdout.split())
