"""Checks that travel (mmvet_core/successors/checkshare.py, issue 30 part 1): host A checks judge-b and exports the check; host
B (another data folder, the same judge at its own endpoint) imports it with at most a tenth of a check's calls,
verified, and grades a run whose estimate names A's check; an export with a tenth of its grades changed is refused;
an import without a key is stored unverified and its estimates say so; the hub unreachable fails clearly. Both
judges are tests/fake_judge.py servers answering each reference sample's official grade + 0.1 over HTTP."""
from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from mmvet_core.successors.checkshare import (EXPORT_FILE, CheckShareError, endpoint_kind, export_check, import_check,
                                              verify_rule)
from mmvet_core.judging.judge import JudgeSettings
from mmvet_core.successors.judgecheck import call_count, current_check, distinct_prompts, run_judge_check
from mmvet_core.store import Store
from tests.fake_judge import FakeJudgeServer, FakeState, official_grades_answer
from tests.service_helpers import estimate_paragraph
from tests.test_cli import run_cli as _cli      # (`env`: added to this process's environment)

ROOT = Path(__file__).resolve().parent.parent
RERUN = ROOT / "tests" / "data" / "results" / "llava-v1.5-7b-rerun.json"
ANSWER = official_grades_answer(0.1, which="all")       # the re-run graded too
#: The prompts an import re-grades: 5 % of the check's 1,243 distinct prompts, rounded up (at least 60).
VERIFIED = 63



@pytest.fixture(scope="module")
def host_a(tmp_path_factory):
    """Host A's check of judge-b at its endpoint (1,243 calls), exported: (export folder, A's check)."""
    tmp = tmp_path_factory.mktemp("host-a")
    with FakeJudgeServer(FakeState(answer_fn=ANSWER, model_reported="judge-b")) as a:
        store = Store(tmp / "a.db")
        settings = JudgeSettings(base_url=a.url, model="judge-b")
        check = asyncio.run(run_judge_check(store, settings, "sk-a", concurrency=32, resamples=200))
        assert check.calls == distinct_prompts() and check.correctable
        path, n = export_check(store, settings, tmp / "export", host_name="lab-a.example")
        store.close()
    assert n == call_count()
    return path.parent, check


def test_an_export_is_a_dataset_folder_without_key_or_private_host(host_a):
    folder, check = host_a
    import datasets

    data = datasets.load_dataset(str(folder), split="train", cache_dir=str(folder.parent / "ds-cache"))  # never a stale cache
    assert len(data) == 1308 and set(data[0]) >= {"reference", "sample_id", "prediction", "prompt_sha",
                                                  "judge_answers", "grades", "judge", "endpoint_kind",
                                                  "prompt_sha256", "date", "tool_version", "host"}
    row = data[0]
    assert row["judge"] == "judge-b" and row["endpoint_kind"] == "OpenAI-compatible endpoint (private)"
    assert row["judge_answers"] and row["grades"] and row["host"] == "lab-a.example"
    text = (folder / EXPORT_FILE).read_text() + (folder / "README.md").read_text()
    assert "127.0.0.1" not in text and "sk-a" not in text


@pytest.mark.parametrize("judge, kind", [
    ({"provider": "openai", "base_url": None}, "OpenAI API"),
    ({"provider": "azure", "base_url": "https://lab.openai.azure.com"}, "Azure OpenAI"),
    ({"provider": "openai", "base_url": "https://openrouter.ai/api/v1"}, "OpenAI-compatible endpoint (openrouter.ai)"),
    ({"provider": "openai", "base_url": "http://10.0.0.7:8000/v1"}, "OpenAI-compatible endpoint (private)"),
    ({"provider": "openai", "base_url": "http://vllm.lab.internal/v1"}, "OpenAI-compatible endpoint (private)"),
    ({"provider": "openai", "base_url": "http://gpu-box:8000/v1"}, "OpenAI-compatible endpoint (private)"),
], ids=["openai", "azure", "public", "address", "internal-name", "bare-name"])
def test_the_endpoint_kind_never_names_a_private_host(judge, kind):
    assert endpoint_kind(judge) == kind


def test_host_b_imports_with_a_tenth_of_the_calls_verified_and_its_estimate_names_a_check(host_a, tmp_path):
    folder, check_a = host_a
    with FakeJudgeServer(FakeState(answer_fn=ANSWER, model_reported="judge-b")) as b:
        db = tmp_path / "b.db"
        env = {"OPENAI_API_KEY": "sk-b"}
        proc = _cli("judge-check", "--judge-model", "judge-b", "--base-url", b.url, "--db", db, "--import", folder,
                    "--resamples", 200, env=env)
        assert proc.returncode == 0, proc.stderr
        calls = len(b.state.chat_calls())
        assert calls == VERIFIED <= 0.1 * distinct_prompts(), calls          # 63 of a check's 1,243
        assert f"Verified: verification on {VERIFIED} prompts ({VERIFIED} judge calls)" in proc.stdout
        proc = _cli("grade", RERUN, "--judge-model", "judge-b", "--base-url", b.url, "--db", db, "--out",
                    tmp_path / "out", env=env)
    assert proc.returncode == 0, proc.stderr
    line = estimate_paragraph(proc.stdout)
    assert f"imported: check {check_a.check_id[:8]} of lab-a.example, verified here on {VERIFIED} prompts" in line
    lo, hi = (float(x) for x in line.split("[", 1)[1].split("]", 1)[0].split(", "))
    assert lo <= 30.7 <= hi                                         # the re-run's official total


def _tampered(folder: Path, tmp_path: Path) -> Path:
    """The export with every tenth row's grades moved to the other end of the scale."""
    out = tmp_path / "tampered"
    shutil.copytree(folder, out)
    rows = [json.loads(x) for x in (out / EXPORT_FILE).read_text().splitlines()]
    for k, row in enumerate(rows):
        if k % 10 == 0:
            row["grades"] = [0.0 if g >= 0.5 else 1.0 for g in row["grades"]]
    (out / EXPORT_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_an_export_with_a_tenth_of_its_grades_changed_is_refused_and_nothing_is_stored(host_a, tmp_path):
    folder, _ = host_a
    with FakeJudgeServer(FakeState(answer_fn=ANSWER, model_reported="judge-b")) as c:
        store = Store(tmp_path / "c.db")
        settings = JudgeSettings(base_url=c.url, model="judge-b")
        with pytest.raises(CheckShareError, match=f"refused: verification on {VERIFIED} prompts") as err:
            asyncio.run(import_check(store, settings, "sk-c", _tampered(folder, tmp_path), resamples=200, seed=0))
        assert "do NOT agree as closely as a judge agrees with itself" in str(err.value)
        assert current_check(store, settings) is None
        store.close()


def test_an_import_without_a_key_is_unverified_and_its_estimates_say_so(host_a, tmp_path):
    folder, check_a = host_a
    db = tmp_path / "u.db"
    proc = _cli("judge-check", "--judge-model", "judge-b", "--db", db, "--import", folder, "--resamples", 200,
                env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""})
    assert proc.returncode == 0, proc.stderr
    assert "WITHOUT verification" in proc.stdout and "UNVERIFIED" in proc.stdout
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.successors.equivalence import estimate_equivalent, format_equivalent_line
    from mmvet_core.successors.judgecheck import load_references
    from tests.fake_judge import simulate_grades

    store = Store(db)
    check = current_check(store, JudgeSettings(model="judge-b"))
    store.close()
    rerun = next(r for r in load_references(which="all") if r.model == "llava-v1.5-7b-rerun")
    eq = estimate_equivalent(load_bundled_v1(), simulate_grades(ANSWER, rerun.predictions), check,
                             run_judge={"model": "judge-b", "provider": "openai"}, resamples=200)
    assert f"imported: check {check_a.check_id[:8]} of lab-a.example, NOT verified here (unverified)" in \
        format_equivalent_line(eq)


def test_a_hub_dataset_while_the_hub_is_unreachable_fails_clearly(tmp_path):
    proc = _cli("judge-check", "--judge-model", "judge-b", "--db", tmp_path / "h.db", "--import",
                "someone/mmvet-check-judge-b", "--no-verify", env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "cannot read the dataset someone/mmvet-check-judge-b from the Hugging Face hub" in proc.stderr
    assert "download its folder and import that instead" in proc.stderr


@pytest.mark.parametrize("change, says", [
    (lambda r: r.update(prediction="another answer"), "field prediction: not"),
    (lambda r: r.update(grades=[1.5]), "field grades: must be 1 to 10 grades in [0, 1]"),
    (lambda r: r.update(judge="gpt-4o"), "not of 'judge-b'"),
    (lambda r: r.update(prompt_sha256="0" * 12), "is not the prompt this tool's checks grade with"),
    (lambda r: r.update(reference="my-model"), "field reference: 'my-model' is not a reference set"),
], ids=["prediction", "grade", "judge", "prompt", "reference"])
def test_a_malformed_export_is_refused_by_row_and_field_before_any_call(host_a, tmp_path, change, says):
    folder, _ = host_a
    out = tmp_path / "bad"
    shutil.copytree(folder, out)
    rows = [json.loads(x) for x in (out / EXPORT_FILE).read_text().splitlines()]
    change(rows[0])
    (out / EXPORT_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store(tmp_path / "m.db")
    with pytest.raises(CheckShareError, match=None) as err:
        asyncio.run(import_check(store, JudgeSettings(base_url="http://127.0.0.1:9/v1", model="judge-b"), "k", out))
    assert says in str(err.value)
    store.close()


def test_the_verification_rule_follows_the_judges_own_run_to_run_agreement():
    # GPT-4-0613 between its own runs: Δ̄ ≤ 0.0114 (sd 0.066), 2.7 % of samples more than 0.1 apart
    assert verify_rule(62) == (0.0365, 5)
    assert verify_rule(1243)[0] == pytest.approx(0.0114 + 3 * 0.066 / 1243 ** 0.5, abs=1e-4)
