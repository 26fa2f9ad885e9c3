"""UploadGate: where the app reads visitors' files, within the host's limits (issue 9, rows 4, 6, 13)."""
from __future__ import annotations

from pathlib import Path

import pytest

from mmvet_core.inputs.benchmark import BenchmarkError
from mmvet_core.hosting.policy import HostingLimits, UploadGate
from mmvet_core.inputs.parsebox import ParseRefused
from tests.hostile_files import write_raw_xlsx, write_zero_bomb

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "assets" / "examples" / "llava_llama2_13b_chat.json"


@pytest.fixture
def gate(tmp_path):
    return UploadGate(HostingLimits(upload_mb=1, max_rows=1000), tmp_path / "uploads", tmp_path / "exports")


def test_results_are_read_in_bounds(gate, tmp_path):
    assert len(gate.read_results(EXAMPLE, max_bytes=10_000_000).predictions) == 218
    big = write_raw_xlsx(tmp_path / "m_MMVet.xlsx", 5000)
    with pytest.raises(ParseRefused, match="at most 1,000"):
        gate.read_results(big, max_bytes=10_000_000)
    with pytest.raises(ParseRefused, match="at most 1,000"):          # grade files are counted the same way
        gate.check_rows(big)


def test_uploaded_benchmarks_are_capped_and_extracted_under_uploads(gate, tmp_path):
    bomb = write_zero_bomb(tmp_path / "mm-vet.zip", ROOT / "assets" / "mm-vet.json", 5)   # 5 MB > 4 x 1 MB
    with pytest.raises(BenchmarkError, match="more than the allowed 4.2 MB"):
        gate.load_upload(bomb)
    ok = write_zero_bomb(tmp_path / "ok.zip", ROOT / "assets" / "mm-vet.json", 0)
    bench = gate.load_upload(ok)
    assert len(bench) == 218 and [p.name.startswith("zip-") for p in gate.uploads_dir.iterdir()] == [True]


def test_hub_ids_only(gate, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(BenchmarkError, match="names a folder on this server"):
        gate.load_hub("assets/examples")
