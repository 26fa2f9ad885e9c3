"""Specification of `mmvet_core.inputs.results`: every results-file format is read, detected and checked.

Real files come from tests/data (see its README); the other formats are built in `tmp_path` from real predictions.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mmvet_core.inputs.benchmark import Benchmark, Sample, load_bundled_v1
from mmvet_core.inputs.results import ResultsError, ResultsFile, read_results, select_predictions, validate_results
from tests import toolkit_writers as tw

DATA = Path(__file__).resolve().parent / "data"
RESULTS = DATA / "results"
V2_RESULTS = DATA / "mmvet-v2-partial" / "gemini-1.5-pro.json"
BENCH = load_bundled_v1()
TRICKY = ["  leading and trailing  ", "a\r\nb", "None", "NA", "n/a", "", "1.50", "tab\there",
          'say "hi", then, go', "line\u2028separator", "naïve ünïcode ✓"]


@pytest.fixture(scope="module")
def bench() -> Benchmark:
    return load_bundled_v1()


@pytest.fixture(scope="module")
def real() -> dict[str, str]:
    """LLaVA-v1.5-13B's published predictions, official format."""
    return json.loads((RESULTS / "llava-v1.5-13b.json").read_text(encoding="utf-8"))


def numbered(preds: dict[str, str]) -> list[tuple[int, str]]:
    return [(int(k.split("_")[1]), v) for k, v in preds.items()]


# --- writers of each format, from {"v1_N": prediction} ---------------------------------------------------

def write_official(path: Path, preds: dict) -> Path:
    path.write_text(json.dumps(preds, indent=2), encoding="utf-8")
    return path


def write_llava(path: Path, preds: dict) -> Path:
    lines = [json.dumps({"question_id": n, "prompt": "q", "text": t, "model_id": "my-llava", "metadata": {}})
             for n, t in numbered(preds)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def lmms(writer):
    """A toolkit writer (tests/toolkit_writers.py) over the bundled v1, as a (path, preds) writer."""
    def write(path: Path, preds: dict) -> Path:
        return writer(path, preds, BENCH)
    return write


write_lmms_logs = lmms(tw.lmms_v01_logs)
write_lmms_jsonl = lmms(tw.lmms_v03_jsonl)
write_lmms_v04 = lmms(tw.lmms_v04_jsonl)
write_lmms_v07 = lmms(tw.lmms_v07_jsonl)


def table(preds: dict) -> pd.DataFrame:
    return tw.vlmevalkit_frame(preds, BENCH)


def write_xlsx(path: Path, preds: dict) -> Path:
    return tw.vlmevalkit_dump(table(preds), path.with_suffix(".xlsx")).rename(path)


def write_tsv(path: Path, preds: dict) -> Path:
    return tw.vlmevalkit_dump(table(preds), path.with_suffix(".tsv")).rename(path)


def write_csv(path: Path, preds: dict) -> Path:
    return tw.vlmevalkit_dump(table(preds), path.with_suffix(".csv")).rename(path)


def write_vlm_json(path: Path, preds: dict) -> Path:
    return tw.vlmevalkit_dump(table(preds), path.with_suffix(".json")).rename(path)


BUILT = [  # (format, writer, file name); names that lie about the content prove detection reads the content
    pytest.param("official-json", write_official, "model.json", id="official-json"),
    pytest.param("official-json", write_official, "model.txt", id="official-json-named-txt"),
    pytest.param("llava-jsonl", write_llava, "answers.jsonl", id="llava-jsonl"),
    pytest.param("lmms-eval-jsonl", write_lmms_jsonl, "20240501_samples_mmvet.jsonl", id="lmms-eval-jsonl"),
    pytest.param("lmms-eval-json", write_lmms_logs, "llava_mmvet.json", id="lmms-eval-logs-json"),
    pytest.param("lmms-eval-jsonl-v0.4", write_lmms_v04, "20250801_samples_mmvet.jsonl", id="lmms-eval-v0.4"),
    pytest.param("lmms-eval-jsonl-v0.7", write_lmms_v07, "20260301_samples_mmvet.jsonl", id="lmms-eval-v0.7"),
    pytest.param("vlmevalkit-json", write_vlm_json, "llava_MMVet.json", id="vlmevalkit-json"),
    pytest.param("vlmevalkit-xlsx", write_xlsx, "llava_MMVet.xlsx", id="vlmevalkit-xlsx"),
    pytest.param("vlmevalkit-xlsx", write_xlsx, "workbook.bin", id="vlmevalkit-xlsx-named-bin"),
    pytest.param("vlmevalkit-tsv", write_tsv, "llava_MMVet.tsv", id="vlmevalkit-tsv"),
    pytest.param("vlmevalkit-csv", write_csv, "llava_MMVet.csv", id="vlmevalkit-csv"),
    pytest.param("vlmevalkit-csv", write_csv, "llava_MMVet.tsv", id="vlmevalkit-csv-named-tsv"),
]


# --- detection and full coverage ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, fmt", [
    pytest.param(name, fmt, id=name) for name, fmt in [
        ("llava-v1.5-13b.json", "official-json"), ("llava-v1.5-7b.json", "official-json"),
        ("llava-v1.5-7b-rerun.json", "official-json"), ("llava_llama2_13b_chat.json", "official-json"),
        ("llava-v1.5-13b.answers.jsonl", "llava-jsonl")]])
def test_real_results_files_are_detected_and_cover_all_218_samples(name, fmt, bench):
    results = read_results(RESULTS / name)
    report = validate_results(results, bench)
    assert results.format == fmt
    assert (report.ok, report.matched, report.n_expected) == (True, 218, 218)
    assert not (report.missing or report.extra or report.duplicated or report.non_string)


@pytest.mark.parametrize("fmt, write, name", BUILT)
def test_every_format_is_detected_from_content_and_gives_the_real_predictions(fmt, write, name, tmp_path, bench,
                                                                               real):
    results = read_results(write(tmp_path / name, real))
    report = validate_results(results, bench)
    assert results.format == fmt
    assert report.ok and report.matched == 218, report.summary()
    assert select_predictions(results, bench) == real


def test_llava_jsonl_and_official_json_of_the_same_run_give_identical_predictions(bench):
    jsonl = read_results(RESULTS / "llava-v1.5-13b.answers.jsonl")
    official = read_results(RESULTS / "llava-v1.5-13b.json")
    assert set(jsonl.predictions) == {str(n) for n in range(218)}   # bare ids kept as read
    assert select_predictions(jsonl, bench) == select_predictions(official, bench)
    assert list(select_predictions(jsonl, bench)) == bench.ids        # benchmark order


@pytest.mark.parametrize("write, name, expected", [
    pytest.param(write_llava, "answers.jsonl", "my-llava", id="llava-model_id"),
    pytest.param(write_lmms_logs, "logs.json", "liuhaotian/llava-v1.5-13b", id="lmms-eval-pretrained"),
    pytest.param(write_official, "gpt-4o.json", "gpt-4o", id="official-file-stem"),
    pytest.param(write_tsv, "qwen_MMVet.tsv", "qwen", id="vlmevalkit-file-name"),
    pytest.param(write_tsv, "qwen_MMVet_gpt-4-turbo.tsv", "qwen", id="vlmevalkit-graded-file-name"),
])
def test_model_name_hint(write, name, expected, tmp_path, real):
    assert read_results(write(tmp_path / name, real)).model_name == expected


@pytest.mark.parametrize("fmt, write, name", [p for p in BUILT if "named" not in p.id and "xlsx" not in p.id])
def test_predictions_are_kept_byte_exact(fmt, write, name, tmp_path, bench):
    preds = {f"v1_{n}": text for n, text in enumerate(TRICKY)}
    results = read_results(write(tmp_path / name, preds))
    assert {k: v for k, v in select_predictions(results, bench, allow_missing=True).items() if k in preds} == preds


def test_xlsx_keeps_text_exact_including_carriage_returns_stored_as_x000d(tmp_path, bench):
    # xlsxwriter (VLMEvalKit's engine) stores "\r" as _x000D_, which openpyxl does not decode by itself
    # (xlsxwriter does not escape a literal "_x000D_" in text, so such text cannot survive any reader)
    preds = {f"v1_{n}": text for n, text in enumerate(TRICKY)}
    got = select_predictions(read_results(write_xlsx(tmp_path / "t.xlsx", preds)), bench, allow_missing=True)
    assert {k: got[k] for k in preds} == preds


def crlf(write):
    """A writer whose file has Windows line endings between records (JSON escapes newlines inside strings)."""
    def write_crlf(path: Path, preds: dict) -> Path:
        text = write(path, preds).read_bytes().decode("utf-8")
        path.write_bytes(text.replace("\n", "\r\n").encode("utf-8"))
        return path
    return write_crlf


def write_csv_crlf(path: Path, preds: dict) -> Path:
    table(preds).to_csv(path, index=False, lineterminator="\r\n")   # rows end in CRLF, cells keep their "\n"
    return path


@pytest.mark.parametrize("write, name", [
    pytest.param(crlf(write_llava), "a.jsonl", id="llava-jsonl"),
    pytest.param(crlf(write_official), "r.json", id="official"),
    pytest.param(write_csv_crlf, "t.csv", id="vlmevalkit-csv"),
])
def test_windows_line_endings_and_a_byte_order_mark_are_tolerated(write, name, tmp_path, bench, real):
    path = write(tmp_path / name, real)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert select_predictions(read_results(path), bench) == real


def test_a_one_line_llava_file_is_still_llava(tmp_path, bench):
    path = write_llava(tmp_path / "one.jsonl", {"v1_4": "x"})
    results = read_results(path)
    assert (results.format, results.predictions) == ("llava-jsonl", {"4": "x"})


def test_vlmevalkit_tables_accept_v1_string_indexes(tmp_path, bench, real):
    df = table(real).assign(index=list(real))
    df.to_csv(tmp_path / "t.tsv", sep="\t", index=False)
    assert select_predictions(read_results(tmp_path / "t.tsv"), bench) == real


def test_bare_numeric_ids_map_to_the_benchmark_version(tmp_path):
    v2 = Benchmark("mmvet-v2", "v2", {f"v2_{n}": Sample(f"v2_{n}", "q", "a", ("rec",)) for n in range(3)})
    results = read_results(write_llava(tmp_path / "a.jsonl", {f"v1_{n}": f"p{n}" for n in range(3)}))
    assert select_predictions(results, v2) == {"v2_0": "p0", "v2_1": "p1", "v2_2": "p2"}


def test_a_subset_benchmark_expects_only_its_samples(bench):
    bard = bench.subset(bench.bard_set, "bard")
    report = validate_results(read_results(RESULTS / "llava-v1.5-13b.json"), bard)
    assert (report.ok, report.n_expected, report.matched, len(report.extra)) == (True, 168, 168, 50)


# --- problems are reported, not hidden ---------------------------------------------------------------------

def test_missing_extra_duplicated_and_non_string_predictions_are_reported(tmp_path, bench, real):
    kept = {k: v for k, v in real.items() if k not in ("v1_5", "v1_9")}
    body = json.dumps({**kept, "v1_3": 42, "v1_4": ["a", "list"], "v1_6": None, "v1_999": "extra"})
    # the same key twice: json would keep the last, we keep the first and say so
    body = body[:-1] + ', "v1_0": "second copy"}'
    (tmp_path / "r.json").write_text(body, encoding="utf-8")
    results = read_results(tmp_path / "r.json")
    report = validate_results(results, bench)
    assert results.predictions["v1_0"] == real["v1_0"]
    assert report.missing == ["v1_5", "v1_6", "v1_9"]          # None counts as missing
    assert report.extra == ["v1_999"]
    assert report.duplicated == ["v1_0"]
    assert report.non_string == ["v1_3", "v1_4"]
    assert report.matched == 218 - 3 and not report.ok
    summary = report.summary()
    for fragment in ("Format: official JSON · 215 of 218 samples matched", "v1_5, v1_6, v1_9", "v1_999",
                     "Duplicated", "v1_4"):
        assert fragment in summary
    assert json.loads(json.dumps(report.to_dict()))["ok"] is False


def test_duplicate_lines_in_jsonl_keep_the_first_and_are_reported(tmp_path, bench, real):
    path = write_llava(tmp_path / "a.jsonl", real)
    path.write_text(path.read_text() + json.dumps({"question_id": 0, "text": "again"}) + "\n")
    results = read_results(path)
    assert results.duplicates == ["0"] and results.predictions["0"] == real["v1_0"]
    assert validate_results(results, bench).duplicated == ["0"]


def test_a_bare_id_and_its_full_form_count_as_a_duplicate(tmp_path, bench):
    results = ResultsFile("x.json", "official-json", {"v1_0": "full", "0": "bare"}, [], None)
    assert validate_results(results, bench).duplicated == ["v1_0"]
    assert select_predictions(results, bench, allow_missing=True)["v1_0"] == "full"


def test_numbers_alone_do_not_block_grading_but_lists_do(bench, real):
    with_number = ResultsFile("x.json", "official-json", {**real, "v1_3": 42}, [], None)
    assert validate_results(with_number, bench).ok
    with_list = ResultsFile("x.json", "official-json", {**real, "v1_3": ["42"]}, [], None)
    assert not validate_results(with_list, bench).ok


def test_a_results_file_of_another_benchmark_is_called_out(bench):
    results = read_results(V2_RESULTS)
    report = validate_results(results, bench)
    assert report.wrong_benchmark and report.matched == 0
    assert "none of the 517 ids match mmvet-v1 — wrong benchmark: these are mm-vet v2 ids" in report.summary().lower()
    assert "--benchmark mmvet-v2" in report.summary()
    with pytest.raises(ResultsError, match="--benchmark mmvet-v2"):
        select_predictions(results, bench, allow_missing=True)   # 218 empty answers would be useless


# --- select_predictions ------------------------------------------------------------------------------------

def test_missing_predictions_raise_with_ids_and_the_allow_missing_hint(bench, real):
    results = ResultsFile("x.json", "official-json", {k: v for k, v in real.items() if k != "v1_7"}, [], None)
    with pytest.raises(ResultsError, match=r"1 of 218 .*v1_7.*allow-missing"):
        select_predictions(results, bench)


def test_allow_missing_grades_missing_predictions_as_empty_answers(bench, real):
    partial = {k: v for k, v in real.items() if k not in ("v1_7", "v1_8")} | {"v1_8": None}
    selected = select_predictions(ResultsFile("x.json", "official-json", partial, [], None), bench,
                                  allow_missing=True)
    assert list(selected) == bench.ids
    assert selected["v1_7"] == selected["v1_8"] == "" and selected["v1_0"] == real["v1_0"]


@pytest.mark.parametrize("value, expected", [
    pytest.param(42, "42", id="int"), pytest.param(0.5, "0.5", id="float"),
    pytest.param(True, "True", id="bool"), pytest.param(" x ", " x ", id="string-unchanged"),
])
def test_scalar_predictions_become_text_with_str(value, expected, bench, real):
    results = ResultsFile("x.json", "official-json", {**real, "v1_1": value}, [], None)
    assert select_predictions(results, bench)["v1_1"] == expected


@pytest.mark.parametrize("value", [pytest.param(["a"], id="list"), pytest.param({"a": 1}, id="dict")])
def test_list_or_object_predictions_raise_naming_the_ids(value, bench, real):
    results = ResultsFile("x.json", "official-json", {**real, "v1_1": value}, [], None)
    with pytest.raises(ResultsError, match="v1_1"):
        select_predictions(results, bench, allow_missing=True)


# --- unreadable files: a clear ResultsError, never a crash -------------------------------------------------

GOOD_LINE = json.dumps({"question_id": 0, "text": "ok"})
ERRORS = [  # (file content, expected message pattern)
    pytest.param(b"", "empty", id="empty-file"),
    pytest.param(b"  \n\n\t ", "empty", id="whitespace-only"),
    pytest.param(f"{GOOD_LINE}\n{GOOD_LINE}\n{{\"question_id\": 2, \"text\": }}\n".encode(), "line 3",
                 id="malformed-jsonl-says-line"),
    pytest.param(b'{\n  "v1_0": "a",\n  "v1_1": "b"\n  "v1_2": "c"\n}', "line 4", id="malformed-json-says-line"),
    pytest.param(b"[" * 100_000, "nested too deeply", id="deeply-nested-array"),
    pytest.param(b'{"a":' * 100_000, "nested too deeply", id="deeply-nested-object"),
    pytest.param(b'{"v1_0": ' + b"9" * 5000 + b"}", "malformed JSON", id="int-over-4300-digits"),
    pytest.param(b'{"model": "x", "answers": []}', "supported formats", id="unknown-json-layout"),
    pytest.param(b"[]", "supported formats", id="bare-json-array"),
    pytest.param(b'{"a": 1}\n{"b": 2}\n', "supported formats", id="unknown-jsonl-layout"),
    pytest.param(b"id,answer\n0,yes\n", "'index' and 'prediction'", id="table-without-columns"),
    pytest.param(b"\xff\xfe\x00\x01 binary", "not UTF-8", id="binary"),
    pytest.param(b"PK\x03\x04 not really a zip", "cannot read as a table", id="broken-xlsx"),
    pytest.param(b'{"v1_0": {"question": "q", "answer": "a"}}', "metadata or a grade file", id="metadata-file"),
    pytest.param(b'{"doc": {"q": 1}, "filtered_resps": ["x"]}\n{"doc": {}}\n', "doc.question_id",
                 id="lmms-eval-sample-without-id"),
    # the aggregate files users pick by mistake: say which file to use instead
    pytest.param(json.dumps({"results": {"mmvet": {"alias": "mmvet", "gpt_eval_score,none": 31.2}},
                             "group_subtasks": {"mmvet": []}, "configs": {"mmvet": {}}, "versions": {"mmvet": 0.0},
                             "n-shot": {"mmvet": 0}}).encode(), "_samples_mmvet.jsonl", id="lmms-eval-results-json"),
    pytest.param(b'"Category","tot","acc"\n"rec","187","40.6"\n"Overall","218","36.1"\n',
                 "score summary", id="vlmevalkit-score-csv"),
]


@pytest.mark.parametrize("content, message", ERRORS)
def test_unreadable_files_raise_a_user_facing_results_error(content, message, tmp_path):
    path = tmp_path / "results.json"
    path.write_bytes(content)
    with pytest.raises(ResultsError, match=message):
        read_results(path)


def test_a_file_over_the_size_limit_is_refused_naming_the_limit(tmp_path):
    path = write_official(tmp_path / "big.json", {"v1_0": "x" * 2000})
    with pytest.raises(ResultsError, match="limit of 1,000 bytes"):
        read_results(path, max_bytes=1000)


def test_a_missing_file_is_a_results_error(tmp_path):
    with pytest.raises(ResultsError, match="no such results file"):
        read_results(tmp_path / "nope.json")


def test_results_error_is_a_value_error():
    assert issubclass(ResultsError, ValueError)


# --- ids are checked against the question text; a misaligned index is refused ------------------------------

@pytest.mark.parametrize("fmt, write, name", [p for p in BUILT if p.values[0].startswith(("lmms", "vlmevalkit"))
                                              and "named" not in p.id])
def test_every_toolkit_layout_checks_all_218_questions_and_says_where_ids_come_from(fmt, write, name, tmp_path,
                                                                                  bench, real):
    report = validate_results(read_results(write(tmp_path / name, real)), bench)
    assert report.questions_checked == 218 and not report.question_mismatches
    assert "Question text checked: all 218 match the benchmark" in report.summary()
    expected = {"lmms-eval-json": "gpt_eval_score.question_id", "lmms-eval-jsonl": "gpt_eval_score.question_id",
                "lmms-eval-jsonl-v0.4": "gpt_eval_score.question_id",
                "lmms-eval-jsonl-v0.7": "gpt_eval_score.question_id"}.get(fmt, "index (0-based")
    assert report.id_source.startswith(expected) and f"Ids from: {report.id_source}" in report.summary()


def shift_index(path: Path) -> Path:
    """VLMEvalKit's index off by one against its own question column (rows keep their question)."""
    if path.suffix == ".json":
        df = pd.DataFrame(json.loads(path.read_text()))
    elif path.suffix == ".xlsx":
        df = pd.read_excel(path)
    else:
        df = pd.read_csv(path, sep="\t" if path.suffix == ".tsv" else ",")
    df["index"] = df["index"] + 1
    return tw.vlmevalkit_dump(df, path)


@pytest.mark.parametrize("ext", ["xlsx", "tsv", "csv", "json"])
def test_a_vlmevalkit_file_whose_index_is_misaligned_is_refused(ext, tmp_path, bench, real):
    path = shift_index(tw.vlmevalkit(tmp_path / f"m_MMVet.{ext}", real, bench))
    results = read_results(path)
    report = validate_results(results, bench)
    # 154 of the 217 shifted rows land on another question (MM-Vet repeats some questions, e.g. "What is x in
    # the equation?", so a shift by one cannot be caught on every row); one mismatch is enough to refuse
    assert not report.ok and len(report.question_mismatches) == 154
    assert "Questions do NOT match the benchmark" in report.summary() and "refused" in report.summary()
    with pytest.raises(ResultsError, match="do not match"):
        select_predictions(results, bench, allow_missing=True)


def test_lmms_eval_records_without_a_metric_are_checked_against_their_input(tmp_path, bench, real):
    # a v0.4+ log of a task variant without gpt_eval_score: only doc_id and the model's input (pre_prompt +
    # question) identify the sample; doc_id goes through the benchmark order and the input must hold the question
    path = tw.lmms_v04_jsonl(tmp_path / "a_samples_mmvet.jsonl", real, bench)
    records = [json.loads(x) for x in path.read_text().splitlines()]
    for rec in records:
        del rec["gpt_eval_score"]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    results = read_results(path)
    report = validate_results(results, bench)
    assert report.ok and report.questions_checked == 218
    assert report.id_source.startswith("doc_id") and select_predictions(results, bench) == real
    for rec in records:
        rec["doc_id"] = (rec["doc_id"] + 1) % 218
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(ResultsError, match="155 of 218 ids.*v1_0: the file has '...[^']*at least 150 words.'"):
        select_predictions(read_results(path), bench)


def test_toolkit_grades_are_read_with_their_judge(tmp_path, bench, real):
    scores = {sid: 0.5 for sid in real}
    results = read_results(tw.vlmevalkit(tmp_path / "m_MMVet_gpt-4-turbo.tsv", real, bench, scores))
    assert (results.grader, results.judge_hint, len(results.grades)) == ("vlmevalkit", "gpt-4-turbo", 218)
    assert "Already graded: 218 samples" in validate_results(results, bench).summary()
    results = read_results(tw.lmms_v07_jsonl(tmp_path / "s_samples_mmvet.jsonl", real, bench, scores, "gpt-4o"))
    assert results.grader == "lmms-eval" and {g.judge for g in results.grades.values()} == {"gpt-4o"}


# --- what real files revealed ------------------------------------------------------------------------------

def test_a_chunk_file_says_which_ids_it_holds_and_suggests_concatenating(tmp_path, bench):
    lines = (RESULTS / "llava-v1.5-13b.answers.jsonl").read_text(encoding="utf-8").splitlines()
    (tmp_path / "8_3.jsonl").write_text("\n".join(lines[84:112]) + "\n", encoding="utf-8")   # LLaVA's chunk 3 of 8
    results = read_results(tmp_path / "8_3.jsonl")
    summary = validate_results(results, bench).summary()
    assert "Holds 28 ids (v1_84–v1_111); 190 missing" in summary
    assert "Concatenate all the chunks" in summary
    assert "Missing predictions (190): v1_0–v1_83, v1_112–v1_217" in summary
    with pytest.raises(ResultsError, match=r"holds 28 ids \(v1_84–v1_111\); 190 missing"):
        select_predictions(results, bench)


def test_a_file_with_scattered_gaps_is_not_called_a_chunk(bench, real):
    results = ResultsFile("x.json", "official-json", {k: v for n, (k, v) in enumerate(real.items()) if n % 3})
    summary = validate_results(results, bench).summary()
    assert "Holds 145 ids" in summary and "Concatenate" not in summary


@pytest.mark.parametrize("wrap, expected", [
    pytest.param(lambda q, a: "A chat between a curious human and an artificial intelligence assistant. The "
                              f"assistant gives helpful answers. USER: <image> ASSISTANT: {a}",
                 "start with the same", id="system-prompt-prefix"),
    pytest.param(lambda q, a: f"USER: <image>\n{q} ASSISTANT: {a}", "role markup", id="llava-template"),
    pytest.param(lambda q, a: f"<|im_start|>assistant\n{a}", "start with the same", id="chatml"),
    pytest.param(lambda q, a: f"{q}\n{a}", "repeat the question", id="question-echo"),
])
def test_echoed_chat_templates_and_questions_are_warned_about(wrap, expected, tmp_path, bench, real):
    echoed = {sid: wrap(bench.samples[sid].question, a) for sid, a in real.items()}
    report = validate_results(read_results(write_official(tmp_path / "e.json", echoed)), bench)
    assert report.ok            # a warning, not a refusal: the user decides
    assert any(expected in w for w in report.warnings), report.warnings
    assert "Warning: 218 of 218 predictions" in report.summary()


@pytest.mark.parametrize("name", ["llava-v1.5-13b.json", "llava-v1.5-7b.json", "llava-v1.5-7b-rerun.json",
                                  "llava_llama2_13b_chat.json"])
def test_real_predictions_raise_no_echo_warning(name, bench):
    assert validate_results(read_results(RESULTS / name), bench).warnings == []


UPLOAD_FOLDER = "5f1d3c9a" * 8          # a Gradio upload folder: a 64-character digest


@pytest.mark.parametrize("fmt", ["lmms-eval-jsonl-v0.4", "lmms-eval-jsonl-v0.7"])
def test_an_lmms_eval_samples_file_is_named_from_its_results_file_its_folder_or_its_name_never_a_hash(
        fmt, tmp_path, bench, real):
    """Issue 19, item 2. Before: an uploaded samples file was named after its 64-character upload folder."""
    name = "20250103_101112_samples_mmvet.jsonl"
    # as lmms-eval leaves them: <output>/<model_name_sanitized>/<date>_samples_mmvet.jsonl + <date>_results.json
    out = tmp_path / "logs" / "liuhaotian__llava-v1.5-13b"
    out.mkdir(parents=True)
    samples = tw.LMMS_WRITERS[fmt](out / name, real, bench)
    assert read_results(samples).model_name == "liuhaotian__llava-v1.5-13b"      # the folder lmms-eval made
    tw.lmms_results_json(out, "20250103_101112", "pretrained=liuhaotian/llava-v1.5-13b,conv_template=v1")
    found = read_results(samples)
    assert (found.model_name, found.model_source) == ("liuhaotian/llava-v1.5-13b",
                                                      "lmms-eval's 20250103_101112_results.json beside it")
    assert "Model: liuhaotian/llava-v1.5-13b (from lmms-eval's 20250103_101112_results.json" in \
        validate_results(found, bench).summary()
    # uploaded: the server's folder is never a name nor read; the visitor's file name is used
    upload = tmp_path / UPLOAD_FOLDER
    upload.mkdir()
    (upload / name).write_bytes(samples.read_bytes())
    tw.lmms_results_json(upload, "20250103_101112", "pretrained=someone/else")       # not the visitor's file
    for original in (name, f"C:\\Users\\me\\{name}"):
        got = read_results(upload / name, original_name=original)
        assert (got.model_name, got.model_source) == ("20250103_101112_samples_mmvet", "the file name")
        assert got.path == str(upload / name)
    hashed = tmp_path / "b" / UPLOAD_FOLDER                                          # a digest folder, not uploaded
    hashed.mkdir(parents=True)
    (hashed / name).write_bytes(samples.read_bytes())
    assert UPLOAD_FOLDER not in read_results(hashed / name).model_name


def test_an_uploaded_file_is_named_after_its_original_name_in_names_and_messages(tmp_path, real):
    upload = tmp_path / UPLOAD_FOLDER
    upload.mkdir()
    tsv = write_tsv(upload / "tmpab12cd.tsv", real)
    assert read_results(tsv, original_name="qwen2-vl_MMVet.tsv").model_name == "qwen2-vl"
    (upload / "tmpzz.json").write_text("{ not json")
    with pytest.raises(ResultsError, match=r"^my-model\.json: malformed JSON"):
        read_results(upload / "tmpzz.json", original_name="my-model.json")
