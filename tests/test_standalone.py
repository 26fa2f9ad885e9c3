"""The repository stands alone: no tracked file reads a reference folder outside the repository or an absolute
path of it. (The full proof, a fresh clone passing the suite, is ``tests/fresh_clone.sh``.)"""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = re.compile(r"\.\./shared|/work/|[\"']shared[\"']\s*/\s*[\"']data[\"']|/ \"shared\"")


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.splitlines()
            if p.endswith((".py", ".md", ".txt", ".ini", ".sh", ".toml", ".cfg", ".yml", ".yaml")) or "/" not in p]


def test_no_tracked_file_reads_shared_or_a_machine_path():
    offenders = []
    for path in tracked_text_files():
        if path.name in {"test_standalone.py", "fresh_clone.sh"} or not path.is_file():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if FORBIDDEN.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


def test_the_data_the_tests_need_is_in_the_repository():
    data = ROOT / "tests" / "data"
    for rel in ["mmvet-v1/mm-vet.json", "prompts/mmvet-v1-judge-prompt.txt", "results/llava-v1.5-13b.json",
                "official-grades/llava-v1.5-13b_gpt-4-grade-3runs.json", "README.md"]:
        assert (data / rel).is_file(), rel
    assert "CC BY-NC 4.0" in (data / "README.md").read_text(encoding="utf-8")
