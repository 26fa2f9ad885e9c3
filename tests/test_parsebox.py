"""Bounded parsing of visitors' files (issue 9, row 6): rows counted before parsing, memory / time / parallelism
of the parse bounded by a worker process. Each test performs the attack the audit measured, scaled down."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from mmvet_core.inputs.benchmark import BenchmarkError
from mmvet_core.inputs.parsebox import ParseBox, ParseLimits, ParseRefused, prescan
from mmvet_core.inputs.results import ResultsError, read_results
from mmvet_core.inputs.sources import load_benchmark
from tests.hostile_files import write_raw_xlsx
from tests.waiting import wait_until

EXAMPLE = Path(__file__).resolve().parent.parent / "assets" / "examples" / "llava_llama2_13b_chat.json"


def write_xlsx(path: Path, rows: int, *, declare: int | None = None) -> Path:
    return write_raw_xlsx(path, rows, declare=declare)


def test_a_workbook_with_too_many_rows_is_refused_before_parsing(tmp_path):
    path = write_xlsx(tmp_path / "m_MMVet.xlsx", 200_000)
    with pytest.raises(ParseRefused, match="declares 200,001 rows; at most 20,000"):     # prescan parses nothing
        prescan(path)


def test_a_workbook_that_lies_about_its_dimension_is_counted(tmp_path):
    path = write_xlsx(tmp_path / "m_MMVet.xlsx", 50_000, declare=10)
    with pytest.raises(ParseRefused, match="holds more than 20,000 rows"):
        prescan(path)
    ok = write_xlsx(tmp_path / "ok.xlsx", 218)                          # a real-sized workbook passes
    prescan(ok)
    assert len(ParseBox().call(read_results, str(ok)).predictions) == 218


def test_a_table_with_too_many_lines_is_refused(tmp_path):
    path = tmp_path / "m_MMVet.csv"
    path.write_text("index,prediction\n" + "".join(f"{i},x\n" for i in range(30_000)))
    with pytest.raises(ParseRefused, match="more than 20,000 rows"):
        prescan(path)
    jsonl = tmp_path / "answers.jsonl"
    jsonl.write_text("".join(json.dumps({"question_id": i, "text": "x"}) + "\n" for i in range(30_000)))
    with pytest.raises(ParseRefused, match="more than 20,000 rows"):
        prescan(jsonl)
    prescan(EXAMPLE)                                                    # the official example passes


def test_the_worker_returns_what_the_reader_returns():
    box = ParseBox()
    got = box.call(read_results, str(EXAMPLE))
    assert got.predictions == read_results(EXAMPLE).predictions
    with pytest.raises(ResultsError, match="no such results file"):
        box.call(read_results, "missing.json")
    with pytest.raises(BenchmarkError, match="not found"):
        box.call(load_benchmark, "missing/mm-vet.zip", error=BenchmarkError)


def test_memory_of_a_parse_is_bounded(tmp_path):
    """A 30 MB JSON of 1.5 M tiny entries needs ~300 MB parsed: with 150 MB allowed the worker is stopped and the
    server process is untouched."""
    path = tmp_path / "big.json"
    with path.open("w") as fh:
        fh.write("{" + ",".join(f'"v1_{i}": "x"' for i in range(1_500_000)) + "}")
    box = ParseBox(ParseLimits(memory_bytes=150_000_000))
    with pytest.raises(ResultsError, match="needed more than 0.1 GB of memory"):
        box.call(read_results, str(path))


def test_time_of_a_parse_is_bounded(tmp_path):
    path = write_xlsx(tmp_path / "m_MMVet.xlsx", 15_000)               # under the row cap, slow to parse
    box = ParseBox(ParseLimits(timeout_s=0.5))
    with pytest.raises(ResultsError, match="took more than 0.5 s and was stopped"):     # said only once it is killed
        box.call(read_results, str(path))


def test_parses_at_once_are_bounded(tmp_path):
    path = write_xlsx(tmp_path / "m_MMVet.xlsx", 15_000)
    box = ParseBox(ParseLimits(max_parallel=1, queue_wait_s=0.2, timeout_s=60))
    outcome: list[str] = []

    def first():
        try:
            box.call(read_results, str(path))
            outcome.append("done")
        except ResultsError as e:
            outcome.append(str(e))

    worker = threading.Thread(target=first)
    worker.start()
    # wait until the first parse holds its turn
    wait_until(lambda: not box._turns._value or not worker.is_alive(), 300, every=0.01)
    assert worker.is_alive(), outcome
    with pytest.raises(ResultsError, match="The server is busy reading other visitors' files"):
        box.call(read_results, str(EXAMPLE))
    worker.join(120)
    assert outcome                                                      # the first parse ran to its end


def test_the_worker_gets_no_secrets(monkeypatch):
    """The worker parses hostile bytes: the host's key is not in its environment."""
    import os

    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    box = ParseBox()
    assert box.call(os.getenv, "OPENAI_API_KEY") is None and box.call(os.getenv, "PATH")


@pytest.mark.parametrize("declare", [False, True], ids=["cells-counted", "dimension-declared"])
def test_a_workbook_of_a_million_cells_in_two_rows_is_refused_before_parsing(tmp_path, declare):
    """Issue 20: 2 rows passed the row count, then the parse took 170 s and 2.9 GB."""
    from tests.hostile_files import write_wide_xlsx

    path = write_wide_xlsx(tmp_path / "m_MMVet_gpt-4.xlsx", 1_000_000, declare=declare)
    with pytest.raises(ParseRefused, match="more than 300,000 cells"):      # how fast: bench/crowd_bench.py
        prescan(path)


def test_a_workbook_of_too_much_xml_is_refused(tmp_path):
    path = write_xlsx(tmp_path / "m_MMVet.xlsx", 218)
    with pytest.raises(ParseRefused, match="bytes of XML"):
        prescan(path, ParseLimits(max_xml_bytes=10_000))
    prescan(path)


def test_grade_files_are_read_in_the_worker_and_their_errors_come_back(tmp_path):
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.scores.export import GradeFileError
    from mmvet_core.runs.gradesets import set_from_grade_file
    from mmvet_core.scores.graded import read_grade_file

    grades = Path(__file__).resolve().parent / "data" / "official-grades" / "llava-v1.5-13b_gpt-4-grade-3runs.json"
    box, bench = ParseBox(), load_bundled_v1()
    assert box.call(read_grade_file, str(grades), bench).scores == read_grade_file(grades, bench).scores
    assert box.call(set_from_grade_file, str(grades), "x").scores == set_from_grade_file(grades, "x").scores
    bad = tmp_path / "none.json"
    bad.write_text(json.dumps({"q1": {"score": 1.0}}))
    with pytest.raises(GradeFileError, match="must be a list"):
        box.call(set_from_grade_file, str(bad), "x")
