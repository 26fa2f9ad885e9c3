"""`pip install <clone>` in a fresh virtual environment gives the `mmvet-grader` command and the Python API of
docs/python.md, outside any checkout (issue 32).

The environment is made with ``python -m venv --system-site-packages`` (the requirements are already installed on
this machine: nothing is downloaded) and the package is built from a copy of the checkout's files (tracked and
new, as a clone would have them) with ``--no-build-isolation`` (setuptools and wheel from the machine). Every
command then runs in an empty folder with the checkout off the path, so a module or asset the package does not
install fails here. The docs' scripts talk to our fake judge (tests/fake_judge.py), as in tests/test_docs.py."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import test_docs
from tests.conftest import ROOT
from tests.fake_judge import FakeJudgeServer, FakeState, official_grades_answer


def checkout_files() -> list[str]:
    """What a clone of the current work would hold: tracked files and new files git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return [name for name in listed if (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the venv's bin folder, an empty working folder, the environment without the checkout on any path)."""
    tmp = tmp_path_factory.mktemp("package")
    clone = tmp / "clone"
    for name in checkout_files():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, clone / name)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    bin_dir = venv / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")
           and not k.startswith(("OPENAI_", "AZURE_OPENAI_", "MMVET_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1",
               GRADIO_ANALYTICS_ENABLED="False", PIP_DISABLE_PIP_VERSION_CHECK="1")
    pip = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--no-build-isolation", "--no-index",
                          str(clone)], capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    work = tmp / "work"
    work.mkdir()
    return bin_dir, work, env


def run(installed, *args, env=None):
    bin_dir, work, base = installed
    return subprocess.run([*args], capture_output=True, text=True, cwd=work, env={**base, **(env or {})},
                          timeout=600)


def test_the_installed_package_is_the_one_outside_the_checkout(installed):
    bin_dir = installed[0]
    where = run(installed, str(bin_dir / "python"), "-c", "import mmvet_core, sys; print(mmvet_core.__file__); "
                "print(mmvet_core.ASSETS_DIR); print(mmvet_core.load_bundled_v1().__len__())")
    assert where.returncode == 0, where.stderr
    module, assets, n = where.stdout.split()
    assert "site-packages" in module and not module.startswith(str(ROOT))
    assert Path(assets) == Path(module).parent / "assets" and n == "218"
    top = run(installed, str(bin_dir / "python"), "-c", "import importlib.metadata as m; print(sorted({str(f)."
              "split('/')[0] for f in m.distribution('mmvet-grader').files if str(f).endswith('.py')}))")
    assert top.returncode == 0, top.stderr
    assert set(eval(top.stdout)) <= {"mmvet_core", "mmvet_app"}, "a generic top-level name is installed: " + top.stdout


def test_mmvet_grader_is_the_command_line(installed):
    bin_dir = installed[0]
    helped = run(installed, str(bin_dir / "mmvet-grader"), "--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: mmvet-grader") and "leaderboard" in helped.stdout and "app" in helped.stdout
    assets = run(installed, str(bin_dir / "python"), "-c", "import mmvet_core; print(mmvet_core.ASSETS_DIR)")
    example = Path(assets.stdout.strip()) / "examples" / "llava_llama2_13b_chat.json"   # the installed copy
    graded = run(installed, str(bin_dir / "mmvet-grader"), "grade", str(example), "--baseline", "--out", "results")
    assert graded.returncode == 0, graded.stderr[-3000:]
    assert "218 of 218 samples matched" in graded.stdout and "NOT the MM-Vet metric" in graded.stdout
    assert (installed[1] / "results" / "llava_llama2_13b_chat_keyword-baseline-grade-1runs.json").is_file()


def test_the_python_api_page_runs_outside_the_checkout(installed):
    """docs/python.md's scripts, in order, with the installed interpreter in an empty folder."""
    bin_dir = installed[0]
    blocks = [b for b in test_docs.ALL_BLOCKS["docs/python.md"] if b.lang == "python" and not b.not_run]
    assert len(blocks) >= 4
    state = FakeState.after_gpt4(answer_fn=official_grades_answer(0.1, which="all", otherwise=test_docs.plain_score))
    output = ""
    with FakeJudgeServer(state) as judge:
        for block in blocks:
            script = block.text.replace("JUDGE", test_docs.PLACEHOLDERS["JUDGE"])
            if "RUN_ID" in script:
                script = script.replace("RUN_ID", test_docs.PLACEHOLDERS["RUN_ID"].findall(output)[-1])
            proc = run(installed, str(bin_dir / "python"), "-c", script,
                       env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": judge.url})
            assert proc.returncode == 0, f"docs/python.md:{block.line}:\n{proc.stderr[-3000:]}"
            output += proc.stdout
            for wanted in block.expect:
                assert wanted in proc.stdout, f"docs/python.md:{block.line}: {wanted!r} not in\n{proc.stdout}"
    assert re.search(r"official-equivalent estimate: \d", output)


def test_mmvet_grader_app_serves_the_page_from_the_installed_package(installed, tmp_path):
    """``mmvet-grader app``: the views (mmvet_app) and the bundled assets come from the install, not the checkout."""
    from tests.app_fixtures import wait_http
    from tests.fake_judge import free_port

    bin_dir, work, env = installed
    port = free_port()
    proc = subprocess.Popen([str(bin_dir / "mmvet-grader"), "app", "--host", "127.0.0.1", "--port", str(port)],
                            cwd=work, env={**env, "MMVET_DATA_DIR": str(tmp_path / "data")},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/gradio_api/info")
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as page:
            assert "MM-Vet Grader" in page.read().decode("utf-8")
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
