"""Hub-style rows to a `Benchmark`: the one place every loader's samples end (`benchmark_from_table` for a pyarrow
table: a hub dataset's rows or local parquet files, `load_parquet`; `benchmark_from_rows` for a list of records:
a metadata JSON list). Columns are matched leniently; image bytes are written under ``work_dir/images`` and never
read from a path the data names; a v2 question's image placeholders are rewritten as the official file has them;
image names that are not plain file names are dropped (`with_question_images`).
"""
from __future__ import annotations

import ast
import json
import re
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from .benchmark import Benchmark, BenchmarkError, detect_version, make_samples_from_metadata
from .subsets import with_bard_set

IMAGE_EXTENSIONS: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp")
_IMAGE_TOKEN = re.compile(r"<image_(\d+)>")
_INDEXED_IMAGE_COLUMN = re.compile(r"^image_(\d+)$")
_SAFE_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,200}$")

_ID_COLUMNS = ("question_id", "id", "qid", "sample_id", "index")
_QUESTION_COLUMNS = ("question", "prompt", "query", "text")
_ANSWER_COLUMNS = ("answer", "gt_answer", "ground_truth", "answers")
_CAPABILITY_COLUMNS = ("capability", "capabilities", "cap")
_SOURCE_COLUMNS = ("image_source", "imagesource")
_IMAGENAME_COLUMNS = ("imagename", "image_name", "image_file", "file_name", "filename")


def with_question_images(samples: dict) -> dict:
    """Give samples without an image the first image file named in their question (v2), for display; drop image
    names that are not plain file names (``../x``, ``/etc/x``), since `Benchmark.image_path` joins them to a folder.
    """
    out = {}
    for sid, sample in samples.items():
        if sample.image is None and "<IMG>" in sample.question:
            names = [seg.strip() for seg in sample.question.split("<IMG>")
                     if seg.strip().lower().endswith(IMAGE_EXTENSIONS)]
            if names:
                sample = replace(sample, image=names[0])
        if sample.image is not None and _safe_filename(sample.image) != sample.image:
            sample = replace(sample, image=None)
        out[sid] = sample
    return out


def prefer_test(files: list[Path]) -> list[Path]:
    """The files of the ``test`` split when their names say so, else all of them."""
    test = [f for f in files if re.search(r"(^|[-_.])test([-_.]|$)", f.name)]
    return test or files


def load_parquet(path: str | Path, *, work_dir: Path | None = None) -> Benchmark:
    """Load a ``.parquet`` file, or every ``.parquet`` file under a folder (the ``test`` split when the names say
    so), laid out like one of the hub datasets; see `benchmark_from_table`. Raises `BenchmarkError`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    files = [path] if path.is_file() else prefer_test(sorted(path.rglob("*.parquet")))
    if not files:
        raise BenchmarkError(f"{path.name}: no .parquet files found")
    try:
        table = pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise BenchmarkError(f"{path.name}: not a readable parquet dataset ({exc})") from None
    return benchmark_from_table(table, name=path.stem if path.is_file() else path.name, source=str(path),
                                work_dir=work_dir)


def _pick(columns: Iterable[str], names: Iterable[str]) -> str | None:
    lower = {c.lower(): c for c in columns}
    return next((lower[n] for n in names if n in lower), None)


def _is_image_type(t: Any) -> bool:
    """A datasets ``Image`` column stored as struct<bytes, path>, or raw binary."""
    import pyarrow as pa

    if pa.types.is_struct(t):
        return {"bytes", "path"} <= {t.field(i).name for i in range(t.num_fields)}
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _image_bytes(value: Any) -> bytes | None:
    if isinstance(value, Mapping):
        value = value.get("bytes")      # never read value["path"]: a file path named by untrusted data
    return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) and len(value) else None


def _image_path_name(value: Any) -> str | None:
    if isinstance(value, Mapping) and isinstance(value.get("path"), str):
        return value["path"]
    return None


def _sniff_extension(data: bytes) -> str:
    if data.startswith(b"\x89PNG"):
        return ".png"
    if data.startswith(b"\xff\xd8\xff"):
        return ".jpg"
    if data.startswith(b"GIF8"):
        return ".gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    if data.startswith(b"BM"):
        return ".bmp"
    return ".png"


def _safe_filename(name: Any) -> str | None:
    """`name`'s last path component when it is a plain image file name, else None."""
    if not isinstance(name, str):
        return None
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if _SAFE_FILENAME.match(base) and base.lower().endswith(IMAGE_EXTENSIONS):
        return base
    return None


def _sample_id(value: Any, index: int, prefix: str) -> str:
    if value is None:
        return f"{prefix}_{index}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{prefix}_{value}"
    text = str(value).strip()
    return f"{prefix}_{text}" if text.isdigit() else text


def _parse_capabilities(value: Any) -> list[str]:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                try:
                    value = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    value = text.strip("[]").replace("'", "").replace('"', "")
        if isinstance(value, str):
            value = value.split(",")
    if isinstance(value, (list, tuple)):
        return [str(c).strip().lower() for c in value if str(c).strip()]
    return []


class _ImageWriter:
    """Writes image bytes under ``work_dir/images`` (created on first use)."""

    def __init__(self, work_dir: Path | None):
        self._work_dir = work_dir
        self.directory: Path | None = None

    def write(self, name: str, data: bytes) -> None:
        if self.directory is None:
            self.directory = make_work_dir(self._work_dir) / "images"
            self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / name
        if not target.exists():
            target.write_bytes(data)


def make_work_dir(work_dir: Path | None) -> Path:
    """`work_dir`, created if needed; a fresh temporary folder when None."""
    if work_dir is None:
        return Path(tempfile.mkdtemp(prefix="mmvet-"))
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    return work_dir


def benchmark_from_table(table: Any, *, name: str, source: str, work_dir: Path | None = None,
                         version_hint: str | None = None) -> Benchmark:
    """Build a benchmark from a pyarrow Table of hub-style rows (the hub path and local parquet both end here).

    Columns are matched leniently: id (``question_id``/``id``; integers n become ``v1_n``, or ``v2_n`` for v2),
    ``question``, ``answer``, ``capability`` (a list, or a comma-separated string such as ``"rec,know,gen"``),
    ``image_source``, ``imagename``. Image columns (datasets ``Image``: struct<bytes, path>) are written to
    ``work_dir/images`` without decoding (``<ext>`` follows the bytes): ``image`` under the row's image name (or
    ``<id>.<ext>``); v2's ``image_<N>`` columns under ``<id>_<N>.<ext>``, with the question's ``<IMG><image_N>``
    placeholders rewritten to ``<IMG><id>_<N>.<ext><IMG>`` so it reads like the official ``mm-vet-v2.json``; a
    column named after an image file of the question is written under that name. Image bytes are only ever taken
    from the table, never from a file path it names.
    """
    import pyarrow as pa

    if not isinstance(table, pa.Table) or table.num_rows == 0:
        raise BenchmarkError(f"{name}: the dataset has no rows")
    columns = table.column_names
    image_columns = [c for c in columns if _is_image_type(table.schema.field(c).type)]
    id_col = _pick(columns, _ID_COLUMNS)
    text_columns = [c for c in columns if c not in image_columns]
    required = {"question": _pick(text_columns, _QUESTION_COLUMNS), "answer": _pick(text_columns, _ANSWER_COLUMNS),
                "capability": _pick(text_columns, _CAPABILITY_COLUMNS)}
    missing = [what for what, col in required.items() if col is None]
    if missing:
        raise BenchmarkError(f"{name}: no {', '.join(missing)} column (found columns: {', '.join(columns)})")
    rows = table.select(text_columns).to_pylist()
    imagename_col = _pick(text_columns, _IMAGENAME_COLUMNS) or _pick(text_columns, ("image",))
    source_col = _pick(text_columns, _SOURCE_COLUMNS)

    is_v2 = version_hint == "v2" or any(
        "<IMG>" in str(r[required["question"]]) or "seq" in _parse_capabilities(r[required["capability"]])
        for r in rows)
    prefix = "v2" if is_v2 else "v1"
    records: list[dict] = []
    for index, row in enumerate(rows):
        records.append({
            "id": _sample_id(row.get(id_col) if id_col else None, index, prefix),
            "question": "" if row[required["question"]] is None else str(row[required["question"]]),
            "answer": "" if row[required["answer"]] is None else str(row[required["answer"]]),
            "capability": _parse_capabilities(row[required["capability"]]),
            "imagename": row.get(imagename_col) if imagename_col else None,
            "imagesource": row.get(source_col) if source_col else None,
        })

    writer = _ImageWriter(work_dir)
    if image_columns:
        index = 0
        for batch in table.select(image_columns).to_batches(max_chunksize=32):
            for images in batch.to_pylist():
                _attach_images(records[index], images, writer)
                index += 1
    return benchmark_from_rows(records, name=name, source=source, prefix=prefix, images_dir=writer.directory)


def _attach_images(record: dict, images: Mapping[str, Any], writer: _ImageWriter) -> None:
    """Write one row's images and point the record (imagename, question placeholders) at the files."""
    sid = record["id"]
    question = record["question"]
    if _IMAGE_TOKEN.search(question):
        # Hub v2 rows spell images "<IMG><image_N>" followed directly by text; the official mm-vet-v2.json has
        # "<IMG>v2_K_N.png<IMG>text". Rebuild that, so the judge prompt gets the official "<image>" segments.
        def to_filename(match: re.Match) -> str:
            data = _image_bytes(images.get(f"image_{match.group(1)}"))
            filename = f"{sid}_{match.group(1)}{_sniff_extension(data) if data else '.png'}"
            if data:
                writer.write(filename, data)
            before, after = question[:match.start()], question[match.end():]
            return ("<IMG>" if before and not before.endswith("<IMG>") else "") + filename + (
                "<IMG>" if after and not after.startswith("<IMG>") else "")

        question = record["question"] = _IMAGE_TOKEN.sub(to_filename, question)
    for token in {seg.strip() for seg in question.split("<IMG>")[1:]}:
        if token in images and _safe_filename(token):     # a column named after the image file (lmms-eval style)
            data = _image_bytes(images[token])
            if data:
                writer.write(token, data)
    main = images.get("image")
    if main is None and len(images) == 1:
        (column, main), = images.items()
        if _INDEXED_IMAGE_COLUMN.match(column) or _safe_filename(column):
            main = None                     # a v2 per-placeholder column, handled above
    data = _image_bytes(main)
    if data:
        filename = (_safe_filename(record.get("imagename")) or _safe_filename(_image_path_name(main))
                    or f"{sid}{_sniff_extension(data)}")
        writer.write(filename, data)
        record["imagename"] = filename


def benchmark_from_rows(records: list[dict], *, name: str, source: str, prefix: str | None = None,
                         images_dir: Path | None = None) -> Benchmark:
    """Records ``{"id"|"question_id", "question", "answer", "capability", "imagename", "imagesource"}`` -> Benchmark.

    Integer ids n become ``<prefix>_n``; `prefix` defaults to ``v2`` when a question holds ``<IMG>`` or a sample
    needs ``seq``, else ``v1``.
    """
    metadata: dict[str, dict] = {}
    if prefix is None:
        prefix = "v2" if any("<IMG>" in str(r.get("question", "")) or "seq" in _parse_capabilities(
            r.get("capability")) for r in records) else "v1"
    for index, record in enumerate(records):
        raw_id = record.get("id") if record.get("id") is not None else record.get("question_id")
        sid = _sample_id(raw_id, index, prefix)
        if sid in metadata:
            raise BenchmarkError(f"{name}: sample id {sid!r} appears more than once")
        entry = {k: record.get(k) for k in ("question", "answer") if k in record}
        if "capability" in record:
            entry["capability"] = _parse_capabilities(record["capability"]) or record["capability"]
        name_value = record.get("imagename")
        if isinstance(name_value, str) and name_value.strip():
            entry["imagename"] = name_value
        if record.get("imagesource") is not None:
            entry["imagesource"] = str(record["imagesource"])
        metadata[sid] = entry
    try:
        samples = with_question_images(make_samples_from_metadata(metadata))
    except BenchmarkError as exc:
        raise BenchmarkError(f"{name}: {exc}") from None
    version = detect_version(samples)
    bench = Benchmark(name=name, version=version, samples=samples, source=source, images_dir=images_dir)
    return with_bard_set(bench)
