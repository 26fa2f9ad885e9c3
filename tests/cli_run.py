"""`python -m mmvet_core ARGS` run in the test's own process: the same parser, commands and output as the real
process (`mmvet_core.cli.main`, as `__main__` calls it), without a new interpreter importing pandas, openai and
the package again for each call (≈ 0.5 CPU-s a call; the suite makes hundreds: issue 32).

Use it where a test is about what a command does or prints. Where the process itself is the subject, tests start
a real one with `subprocess`: a command with no key in its environment and what a fresh interpreter imports
(`tests/test_cli.py`), a kill and a resume (`test_killed_run.py`, `test_batch.py`), workers (`test_workers.py`),
the installed `mmvet-grader` (`test_package.py`), the docs' shell lines (`test_docs.py`).
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import threading
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_one_at_a_time = threading.Lock()       # the environment, directory and sys.stdout are the process's


def run_cli(*args, env: dict[str, str] | None = None, cwd: str | Path | None = None
            ) -> subprocess.CompletedProcess:
    """Run ``python -m mmvet_core *args`` here: `env` is the whole environment of the call (as `subprocess`'s
    ``env=``; default: this process's), `cwd` its directory (default: the checkout). Returns what a
    `subprocess.run(..., capture_output=True, text=True)` would: the exit status, stdout and stderr; an uncaught
    exception is printed to stderr with status 1, as the interpreter does."""
    from mmvet_core.cli import main

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with _one_at_a_time:
        saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        os.chdir(cwd or ROOT)
        sys.argv = ["python -m mmvet_core", *argv]
        try:
            # a process of its own has no logging handler: Python's last resort prints warnings to stderr
            last_resort = logging.StreamHandler(err)
            last_resort.setLevel(logging.WARNING)
            logging.getLogger().addHandler(last_resort)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                    if e.code is not None and not isinstance(e.code, int):
                        print(e.code, file=sys.stderr)
                except Exception:                       # noqa: BLE001 (the interpreter's own behaviour)
                    traceback.print_exc()
                    code = 1
        finally:
            logging.getLogger().removeHandler(last_resort)
            sys.argv = saved_argv
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
    return subprocess.CompletedProcess(["python", "-m", "mmvet_core", *argv], code or 0, out.getvalue(),
                                       err.getvalue())
