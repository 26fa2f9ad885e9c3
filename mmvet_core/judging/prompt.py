"""The official MM-Vet judge prompts, how they are filled, and how the judge's answer is parsed (all pure).

The prompt texts are data files in ``mmvet_core/judging/prompts/``, byte-identical to the official evaluators'. Filling
and parsing follow the official scripts exactly (see ``tests/data/README.md`` and the official evaluator):

- v1: ``prompt + "\\n" + " | ".join([question, gt, prediction, ""])``; retry suffix
  ``"\\nPredict the correctness of the answer (digit): "``.
- v2: ``prompt + "| " + " | ".join([question, gt, prediction, ""])`` with newlines as ``<br>`` and image-name
  segments of the question as ``<image>``; retry suffix ``"\\n\\nPredict the correctness of the answer (digit): "``.
"""
from __future__ import annotations

import hashlib
import math
from functools import lru_cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
PROMPT_FILES = {"v1": "mmvet-v1-judge-prompt.txt", "v2": "mmvet-v2-judge-prompt.txt"}
RETRY_SUFFIX = {"v1": "\nPredict the correctness of the answer (digit): ",
                "v2": "\n\nPredict the correctness of the answer (digit): "}
#: Temperatures of the official retries after an unparsable answer (the first call is at 0.0).
RETRY_TEMPERATURES = (0.0, 0.5, 1.0, 1.5, 2.0)
#: The official v2 test for an image-name segment of a question (``q.endswith((".jpg", "jpeg", ".png"))``), kept
#: verbatim: any other test changes some prompts (".gif", "X.PNG", "a.png " stay text officially).
_IMAGE_SUFFIXES = (".jpg", "jpeg", ".png")


@lru_cache(maxsize=None)
def load_prompt(version: str) -> str:
    """The official few-shot judge prompt for ``"v1"`` or ``"v2"``, exactly as shipped."""
    if version not in PROMPT_FILES:
        raise ValueError(f"unknown MM-Vet version {version!r}; expected one of {sorted(PROMPT_FILES)}")
    return (PROMPTS_DIR / PROMPT_FILES[version]).read_bytes().decode("utf-8")


#: The official prompt's in-context example rows, numbered (1)-(7) in order as in the paper (§4.5, Table 8).
ALL_EXAMPLES: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7)
#: Lines before the example rows: the instruction, a blank line, the table header and its separator.
_HEADER_LINES = 4


def parse_examples(text: str | None) -> tuple[int, ...] | None:
    """``"1,2,3,5"`` -> ``(1, 2, 3, 5)`` (in the official order); ``"none"`` -> ``()``; None, ``""`` or ``"all"``
    -> None (the official prompt). Raises `ValueError` for a number outside 1-7 or a repeated one.

    >>> parse_examples("5, 1"), parse_examples("none"), parse_examples("all"), parse_examples("1,2,3,4,5,6,7")
    ((1, 5), (), None, None)
    """
    if text is None or text.strip().lower() in ("", "all"):
        return None
    if text.strip().lower() == "none":
        return ()
    try:
        numbers = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise ValueError(f"--prompt-examples takes numbers 1-7 separated by commas (e.g. 1,2,3,5), or 'none'; "
                         f"got {text!r}") from None
    bad = [n for n in numbers if n not in ALL_EXAMPLES]
    if bad or len(set(numbers)) != len(numbers):
        raise ValueError(f"prompt examples are numbered 1-7, each once; got {text!r}")
    chosen = tuple(sorted(numbers))
    return None if chosen == ALL_EXAMPLES else chosen


def examples_label(examples: tuple[int, ...] | None) -> str:
    """``(1)(5)`` style label; ``all seven (official)`` for the default; ``none`` for no example.

    >>> examples_label((1, 5)), examples_label(None), examples_label(())
    ('(1)(5)', 'all seven (official)', 'none')
    """
    if examples is None:
        return "all seven (official)"
    return "".join(f"({i})" for i in examples) or "none"


@lru_cache(maxsize=None)
def prompt_template(version: str, examples: tuple[int, ...] | None = None) -> str:
    """The judge prompt with only the in-context example rows `examples` (numbered 1-7 in the official order);
    None is the official prompt itself, byte for byte."""
    template = load_prompt(version)
    if examples is None or tuple(examples) == ALL_EXAMPLES:
        return template
    lines = template.splitlines(keepends=True)
    rows = lines[_HEADER_LINES:]
    if len(rows) != len(ALL_EXAMPLES):     # guards the data file: the official prompt has exactly 7 rows
        raise ValueError(f"the {version} prompt has {len(rows)} example rows, expected {len(ALL_EXAMPLES)}")
    return "".join(lines[:_HEADER_LINES] + [rows[i - 1] for i in sorted(examples)])


def prompt_version_id(version: str) -> str:
    """A short id of the prompt text (recorded with grades): ``mmvet-v1@<sha256[:12]>``."""
    digest = hashlib.sha256(load_prompt(version).encode("utf-8")).hexdigest()[:12]
    return f"mmvet-{version}@{digest}"


def _spaced_ground_truth(answer: str) -> str:
    return answer.replace("<AND>", " <AND> ").replace("<OR>", " <OR> ")


def _v2_question(question: str) -> str:
    segments = question.split("<IMG>")
    return "".join("<image>" if seg.endswith(_IMAGE_SUFFIXES) else seg for seg in segments)


def render_prompt(version: str, question: str, answer: str, prediction: str, *, retry: bool = False,
                  examples: tuple[int, ...] | None = None) -> str:
    """The user message the official evaluator sends for one sample (`retry` adds the official suffix);
    `examples` keeps only those in-context examples (None: all seven, the official prompt).

    >>> render_prompt("v1", "1+1?", "2<OR>two", "2").endswith("\\n1+1? | 2 <OR> two | 2 | ")
    True
    """
    template = prompt_template(version, tuple(examples) if examples is not None else None)
    gt = _spaced_ground_truth(answer)
    if version == "v1":
        text = template + "\n" + " | ".join([question, gt, prediction, ""])
    else:
        fields = [_v2_question(question), gt, prediction]
        fields = [f.replace("\n", "<br>") for f in fields]
        text = template + "| " + " | ".join(fields + [""])
    return text + RETRY_SUFFIX[version] if retry else text


def parse_score(content: str | None) -> float | None:
    """The official parse: first space-separated token as a float, valid only within [0, 1]; else None.

    One named difference: Python's ``float`` accepts ``"nan"``, which the official script would keep as a score
    and which poisons every average; we treat it as unparsable.

    >>> parse_score("0.8"), parse_score("1.0 because"), parse_score(" 0.5"), parse_score("1.5"), parse_score("nan")
    (0.8, 1.0, None, None, None)
    """
    if content is None:
        return None
    token = content.split(" ")[0].strip()
    try:
        score = float(token)
    except ValueError:
        return None
    if math.isnan(score) or score > 1.0 or score < 0.0:
        return None
    return score
