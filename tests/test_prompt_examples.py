"""The prompt's in-context examples (paper §4.5, Table 8): `prompt` shows them, `grade --prompt-examples` uses them,
labels the run not official, names its files apart and never reuses the official prompt's cached answers."""
import json
from pathlib import Path

import pytest

from mmvet_core.judging.judge import JudgeSettings
from mmvet_core.judging.prompt import ALL_EXAMPLES, load_prompt, parse_examples, prompt_template, render_prompt
from tests.conftest import cli_env
from tests.cli_run import run_cli as in_process

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
OFFICIAL_V1 = (DATA / "prompts" / "mmvet-v1-judge-prompt.txt").read_text(encoding="utf-8")
ROWS = OFFICIAL_V1.splitlines(keepends=True)[4:]          # the seven example rows (1)..(7), in order


def run_cli(*args, cwd=None):
    return in_process(*args, env=cli_env(), cwd=cwd)


def test_the_official_prompt_has_seven_example_rows():
    assert len(ROWS) == 7 and all(r.count("|") == 3 for r in ROWS)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_default_examples_are_the_official_prompt_byte_for_byte(version):
    official = (DATA / "prompts" / f"mmvet-{version}-judge-prompt.txt").read_bytes().decode("utf-8")
    assert prompt_template(version) == prompt_template(version, ALL_EXAMPLES) == official
    assert parse_examples("1,2,3,4,5,6,7") is None and parse_examples(None) is None


def test_prompt_cli_prints_the_official_header_with_exactly_examples_1_and_5():
    proc = run_cli("prompt", "--prompt-examples", "1,5")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "".join(OFFICIAL_V1.splitlines(keepends=True)[:4]) + ROWS[0] + ROWS[4]
    assert "NOT the official" in proc.stderr


def test_prompt_cli_default_is_the_official_prompt_and_fills_a_sample():
    assert run_cli("prompt").stdout == OFFICIAL_V1
    proc = run_cli("prompt", "--sample", "v1_0", "--prediction", "two")
    assert proc.stdout == render_prompt("v1", "What is x in the equation?", "-1<AND>-5", "two") + "\n"


def test_v2_examples_are_selected_the_same_way():
    v2 = load_prompt("v2").splitlines(keepends=True)
    assert prompt_template("v2", (2, 7)) == "".join(v2[:4]) + v2[4 + 1] + v2[4 + 6]
    text = render_prompt("v2", "q<IMG>a.png", "1", "1", examples=(2, 7))
    assert text.startswith(prompt_template("v2", (2, 7)))


@pytest.mark.parametrize("bad", ["0", "8", "1,1", "a,b"])
def test_bad_example_lists_are_refused(bad):
    with pytest.raises(ValueError):
        parse_examples(bad)
    proc = run_cli("prompt", "--prompt-examples", bad)
    assert proc.returncode == 2 and "1-7" in proc.stderr


def test_settings_with_other_examples_are_not_official_and_cache_apart():
    official, ablated = JudgeSettings(), JudgeSettings(prompt_examples=(1, 5))
    assert official.is_official and not ablated.is_official
    assert "(1)(5)" in ablated.not_official_reason()
    assert official.fingerprint() != ablated.fingerprint()
    # a stored run gives the examples back as a JSON list
    assert JudgeSettings(**json.loads(json.dumps(ablated.to_dict()))) == ablated


def test_grading_with_examples_sends_them_labels_the_run_and_pays_again_for_the_official_prompt(tmp_path, fake_judge):
    results = DATA / "results" / "llava-v1.5-13b.json"
    subset = tmp_path / "ids.json"
    subset.write_text(json.dumps(["v1_0", "v1_1", "v1_2"]))
    common = ["grade", results, "--subset", subset, "--base-url", fake_judge.url, "--db", tmp_path / "g.db"]
    proc = in_process(*common, "--prompt-examples", "1,5",
                           "--out", tmp_path / "ablated", env=cli_env(OPENAI_API_KEY="sk-test"))
    assert proc.returncode == 0, proc.stderr
    assert "NOT the official MM-Vet prompt" in proc.stdout
    sent = [c["prompt"] for c in fake_judge.state.completed_calls()]
    assert sent and all(p.startswith(prompt_template("v1", (1, 5))) for p in sent)
    assert all(ROWS[1] not in p for p in sent)
    names = sorted(p.name for p in (tmp_path / "ablated").iterdir())
    assert "llava-v1.5-13b_ids_gpt-4-0613-ex15-cap-score-1runs.csv" in names, names
    n_ablated = len(fake_judge.state.calls)
    proc = in_process(*common, "--out", tmp_path / "official", env=cli_env(OPENAI_API_KEY="sk-test"))
    assert proc.returncode == 0, proc.stderr
    new = [c["prompt"] for c in fake_judge.state.calls[n_ablated:]]
    assert len(new) >= 3 and all(p.startswith(OFFICIAL_V1) for p in new)   # not served from the ablated cache
    assert "NOT the official" not in proc.stdout
