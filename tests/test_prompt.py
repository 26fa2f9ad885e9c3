"""The official prompts are shipped byte-exact, filled and parsed exactly as the official scripts do."""
from pathlib import Path

import pytest

from mmvet_core.judging.prompt import load_prompt, parse_score, prompt_version_id, render_prompt

SHARED = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_prompts_are_byte_identical_to_the_official_ones(version):
    official = (SHARED / "prompts" / f"mmvet-{version}-judge-prompt.txt").read_bytes()
    assert load_prompt(version).encode("utf-8") == official


def test_v1_filling_is_prompt_newline_then_pipe_joined_row():
    text = render_prompt("v1", "What is x?", "-1<AND>-5", "x = -1")
    assert text == load_prompt("v1") + "\n" + "What is x? | -1 <AND> -5 | x = -1 | "


def test_v1_retry_appends_the_official_suffix():
    text = render_prompt("v1", "Q", "A<OR>B", "P", retry=True)
    assert text == load_prompt("v1") + "\nQ | A <OR> B | P | " + "\nPredict the correctness of the answer (digit): "


def test_v1_keeps_quirks_of_the_metadata_verbatim():
    # v1_129's question ends with a space; newlines are not replaced in v1
    text = render_prompt("v1", "Why? ", "line1\nline2", "a\nb")
    assert text.endswith("\nWhy?  | line1\nline2 | a\nb | ")


def test_v2_filling_uses_br_and_image_placeholders():
    q = "Compare<IMG>v2_0_0.png<IMG>and<IMG>v2_0_1.jpg<IMG>\nwhich is bigger?"
    text = render_prompt("v2", q, "the first<AND>left", "the\nfirst")
    row = "Compare<image>and<image><br>which is bigger? | the first <AND> left | the<br>first | "
    assert text == load_prompt("v2") + "| " + row
    retry = render_prompt("v2", q, "x", "y", retry=True)
    assert retry.endswith("\n\nPredict the correctness of the answer (digit): ")


@pytest.mark.parametrize("content, expected", [
    ("0.8", 0.8), ("1.0", 1.0), ("0", 0.0), ("1", 1.0), ("0.7 because", 0.7), ("0.5\n", 0.5),
    ("\n0.4", 0.4), ("+0.3", 0.3),
    (" 0.5", None),            # split(" ")[0] is empty: the official parse fails
    ("1.5", None), ("-0.1", None), ("Score:", None), ("", None), (None, None), ("nan", None), ("inf", None),
    ("0.5.", None), ("1.0.", None),
], ids=lambda v: repr(v))
def test_parse_score_is_the_official_parse(content, expected):
    assert parse_score(content) == expected


def test_prompt_version_id_names_the_text():
    assert prompt_version_id("v1").startswith("mmvet-v1@")
    assert prompt_version_id("v1") != prompt_version_id("v2")
