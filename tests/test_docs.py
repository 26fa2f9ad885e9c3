"""Every command the documentation shows is run here, as a reader would run it from a checkout.

The pages are README.md and docs/*.md. For each page (one test each), its fenced blocks run in order:

- ```` ```bash ````: each line is a command (a trailing ``\\`` continues it; ``#`` comments are ignored). A line
  ``python -m mmvet_core ...`` runs in-process (the same ``__main__`` as the real command, argv parsed with shlex,
  output captured); ``export NAME=VALUE`` sets the page's environment; any other line runs in ``bash -c`` with that
  environment. Every command must exit 0.
- ```` ```python ````: a script, run with ``python -c`` in a subprocess (a script is a client of the app, which
  runs in this process: in-process, it would share the app's environment); it must exit 0.
- Any other fence (``text``, ``json``, a layout) is not run, and must not hold commands: a line that starts like
  a command (``python ``, ``pip ``, ``$ ``, ...) outside a bash or python block fails
  `test_commands_are_only_in_run_blocks`.

Where it runs. A page gets a fresh folder that links the checkout's top-level files and folders (``assets/``,
``mmvet_core/``, ``bench/``, ...), so ``assets/examples/...`` is found and ``--out results/`` writes into the
folder; the page's blocks share it, in order (a later block reads what an earlier one wrote). The environment
points at the fake judge (tests/fake_judge.py: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``; nothing real is ever
called) and ``MMVET_DATA_DIR`` at one data folder that every page shares, as a reader's checkout would: a page
that grades what an earlier page graded reuses the stored answers (each page also passes alone). The fake judge
is an endpoint after the gpt-4-0613 shutdown (`FakeState.after_gpt4`: it serves ``judge-b``, whose shutdown is
announced, and ``judge-c``; it answers ``gpt-4-0613`` and ``gpt-4`` with OpenAI's 404), and it grades the
judge-check reference sets with their official grades + 0.1, so checks and estimates have real numbers; any other
prompt gets a score that is a function of the prompt (always parsable: the official retries are tested elsewhere,
here they would only cost time).

Placeholders. A word in CAPITALS that the reader replaces is replaced here, whole words only (`PLACEHOLDERS`):
``JUDGE`` is a judge the endpoint serves; ``RUN_ID`` and ``ENTRY`` are read from what an earlier command of the same
page printed (``Run <id>: ...``, ``... as entry <id> ...``), as the reader would. A placeholder with no value yet
fails the page.

Directives. An HTML comment right before a fence (invisible on the rendered page) tells the test about the block,
items separated by ``;``::

    <!-- docs-test: needs app; expect "Published: My model 7B" -->

- ``expect "TEXT"``: the block's output (stdout and stderr of its commands) contains TEXT; repeat for several.
- ``needs NAME[, NAME]``: the block needs a service that `NEEDS` starts once per module and hands to the block
  (environment variables and text substitutions). ``app``: the app (in-process, the fake judge as the server's
  judge), its address replacing ``http://localhost:7860``. A page that needs something else (a PostgreSQL server,
  a second machine) adds an entry to `NEEDS`: a function ``(stack, judge, tmp_path_factory) -> Service`` that
  starts it on ``stack`` (a contextlib.ExitStack closed at the end of the module). An unknown name fails the page.
  For example, a page about PostgreSQL would add (with whatever helper its own tests use to start the server)::

      def start_postgres(stack, judge, tmp_path_factory) -> Service:
          server = stack.enter_context(PostgresServer(tmp_path_factory.mktemp("pg")))
          return Service(env={"MMVET_DATABASE_URL": server.url})

      NEEDS["postgres"] = start_postgres

  and mark its blocks ``<!-- docs-test: needs postgres -->``.
- ``not run: REASON`` (the last item: the rest of the comment is the reason): the block is not run (installing
  packages, serving forever, the test command itself, benchmarks). A single command may instead end with
  ``# not run: REASON``. Every command not run is listed by `test_the_commands_not_run_are_few_and_say_why`,
  which caps their number (`MAX_NOT_RUN`): keep that set small.

A new page with commands needs nothing else: it is found by its name (docs/*.md).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import runpy
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fake_judge import FakeJudgeServer, FakeState, official_grades_answer

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Pages the map may link to before they exist (a page being written on a branch); none now.
ANNOUNCED_PAGES: set[str] = set()
MAX_NOT_RUN = 19         # commands shown but not run (the two commands, the fresh-clone check, 7 benchmarks, and in
                         # many-machines.md the replicas and workers serving until stopped, nginx's install and the
                         # local stack's start/stop, which tests/test_deploy.py runs)
RUN_LANGS = {"bash", "python"}

#: Placeholder -> a fixed value, or a pattern whose first group is read from the page's earlier output.
PLACEHOLDERS: dict[str, str | re.Pattern] = {
    "JUDGE": "judge-c",
    "RUN_ID": re.compile(r"^Run (\S+):", re.M),
    "ENTRY": re.compile(r" as entry (\S+) "),
}


# --- reading the pages -----------------------------------------------------------------------------------------
@dataclass
class Block:
    page: str
    line: int                 # 1-based line of the opening fence
    lang: str
    text: str
    needs: list[str] = field(default_factory=list)
    expect: list[str] = field(default_factory=list)
    not_run: str | None = None


FENCE = re.compile(r"^(\s*)(`{3,})([\w+-]*)\s*$")
DIRECTIVE = re.compile(r"<!--\s*docs-test:(.*?)-->", re.S)


def parse_directive(text: str, block: Block) -> None:
    """Fill `block` from the items of one ``docs-test`` comment (see the module docstring). ``not run:`` takes the
    rest of the comment as its reason."""
    text, _, reason = text.partition("not run:")
    if reason.strip():
        block.not_run = reason.strip()
    for item in re.findall(r'(?:[^;"]|"[^"]*")+', text):
        item = item.strip()
        if not item:
            continue
        if item.startswith("needs "):
            block.needs += [n.strip() for n in item[len("needs "):].split(",") if n.strip()]
        elif m := re.fullmatch(r'expect\s+"(.*)"', item, re.S):
            block.expect.append(m.group(1))
        else:
            raise ValueError(f"{block.page}:{block.line}: unknown docs-test directive {item!r}")


def read_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown page with their directives, in order."""
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.groups()
        j = i + 1
        while j < len(lines) and not re.match(rf"^\s*{ticks}\s*$", lines[j]):
            j += 1
        body = "\n".join(ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:j])
        block = Block(rel, i + 1, lang.lower(), body)
        k = i - 1                                  # the directive: the comment just above, blank lines allowed
        while k >= 0 and not lines[k].strip():
            k -= 1
        if k >= 0 and lines[k].strip().endswith("-->"):
            start = k
            while start > 0 and "<!--" not in lines[start]:
                start -= 1
            if d := DIRECTIVE.search("\n".join(lines[start:k + 1])):
                parse_directive(d.group(1), block)
        blocks.append(block)
        i = j + 1
    return blocks


def strip_comment(line: str) -> str:
    """`line` without its trailing ``# comment`` (a ``#`` after a space, outside quotes), as bash reads it."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands_of(block: Block) -> list[tuple[str, str | None]]:
    """The commands of a bash block, continuation lines joined: ``(command, reason it is not run or None)``."""
    out, pending = [], ""
    for raw in block.text.split("\n"):
        line = pending + raw
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = re.search(r"#\s*not run:\s*(.+)$", stripped)
        out.append((stripped, block.not_run or (m.group(1).strip() if m else None)))
    return out


ALL_BLOCKS = {p.relative_to(ROOT).as_posix(): read_blocks(p) for p in PAGES}


# --- services a block may need -----------------------------------------------------------------------------------
@dataclass
class Service:
    env: dict[str, str] = field(default_factory=dict)
    substitute: dict[str, str] = field(default_factory=dict)   # text in a command or script -> its value here


def start_app_service(stack: contextlib.ExitStack, judge: FakeJudgeServer, tmp_path_factory) -> Service:
    """The app in-process with the docs' fake judge as the server's judge (as `tests.app_fixtures.host_app`)."""
    from tests.app_fixtures import host_app
    app = stack.enter_context(host_app(judge, tmp_path_factory, name="docs-app"))
    return Service(substitute={"http://localhost:7860/": app.url, "http://localhost:7860": app.url.rstrip("/")})


def start_postgres(stack: contextlib.ExitStack, judge: FakeJudgeServer, tmp_path_factory) -> Service:
    """A PostgreSQL server of the tests (tests/pg_server.py) with an empty database, and a SQLite store holding one
    graded run to copy into it: the page's placeholders become their addresses."""
    from mmvet_core.cli import main as cli_main
    from tests.pg_server import PostgresServer

    server = stack.enter_context(PostgresServer())
    folder = tmp_path_factory.mktemp("docs-sqlite")
    source = folder / "mmvet-grader.db"
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli_main(["grade", str(ROOT / "assets" / "examples" / "llava_llama2_13b_chat.json"), "--baseline",
                         "--db", str(source), "--out", str(folder / "out")]) == 0
    return Service(substitute={"postgresql://grader:...@db.example.org/grader": server.new_database(),
                               "data/mmvet-grader.db": str(source)})


NEEDS = {"app": start_app_service, "postgres": start_postgres}


# --- running a page ----------------------------------------------------------------------------------------------
def checkout_entries() -> list[str]:
    """The checkout's top-level files and folders that git tracks (so that a page writing ``results/`` never writes
    into a developer's own untracked ``results/``); without git, every entry but hidden ones and ``data``."""
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        names = {line.split("/", 1)[0] for line in tracked.splitlines() if line}
    except (OSError, subprocess.CalledProcessError):
        names = {e.name for e in ROOT.iterdir() if e.name != "data"}
    return sorted(n for n in names if not n.startswith(".") and (ROOT / n).exists())


class PageRun:
    """One page's folder, environment, services and output so far."""

    def __init__(self, folder: Path, data: Path, judge: FakeJudgeServer, services):
        self.folder, self.services = folder, services
        for name in checkout_entries():         # the checkout, linked: commands read its files, write here
            (folder / name).symlink_to(ROOT / name)
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_", "MMVET_"))}
        self.env = {**clean, "OPENAI_API_KEY": "sk-docs-test", "OPENAI_BASE_URL": judge.url,
                    "MMVET_DATA_DIR": str(data), "GRADIO_ANALYTICS_ENABLED": "False",
                    "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
        self.output = ""                        # everything the page's commands printed so far

    def fill(self, text: str, block: Block) -> str:
        """Placeholders and the block's services' substitutions applied to `text`."""
        for need in block.needs:
            for old, new in self.services(need).substitute.items():
                text = text.replace(old, new)
        for name, value in PLACEHOLDERS.items():
            if not re.search(rf"\b{name}\b", text):
                continue
            if isinstance(value, re.Pattern):
                found = value.findall(self.output)
                assert found, f"{block.page}:{block.line}: {name} is used before any command printed it"
                value = found[-1]
            text = re.sub(rf"\b{name}\b", value, text)
        return text

    def block_env(self, block: Block) -> dict[str, str]:
        env = dict(self.env)
        for need in block.needs:
            env.update(self.services(need).env)
        return env

    @staticmethod
    def run_cli(argv: list[str]) -> None:
        """``python -m mmvet_core ARGV``: the package's own ``__main__``."""
        sys.argv = ["python -m mmvet_core", *argv]
        runpy.run_module("mmvet_core", run_name="__main__", alter_sys=True)

    def in_process(self, fn, arg, env: dict[str, str]) -> tuple[int, str]:
        """`fn(arg)` in this process, in the page's folder and environment: (exit status, output)."""
        out, saved_env, saved_cwd, saved_argv = io.StringIO(), dict(os.environ), os.getcwd(), sys.argv
        os.environ.clear()
        os.environ.update(env)
        os.chdir(self.folder)
        code = 0
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                fn(arg)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            sys.argv = saved_argv
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        return code, out.getvalue()

    def run_shell(self, command: str, env: dict[str, str]) -> tuple[int, str]:
        proc = subprocess.run(["bash", "-c", command], cwd=self.folder, env=env, capture_output=True, text=True,
                              timeout=300)
        return proc.returncode, proc.stdout + proc.stderr

    def run_block(self, block: Block) -> None:
        env, printed = self.block_env(block), ""
        if block.lang == "python":
            proc = subprocess.run([sys.executable, "-c", self.fill(block.text, block)], cwd=self.folder, env=env,
                                  capture_output=True, text=True, timeout=300)
            code, printed = proc.returncode, proc.stdout + proc.stderr
            assert code == 0, f"{block.page}:{block.line}: the script failed:\n{printed[-3000:]}"
        else:
            for command, not_run in commands_of(block):
                if not_run:
                    continue
                command = self.fill(strip_comment(command), block)
                words = shlex.split(command)
                if words[0] == "export":
                    for assignment in words[1:]:
                        name, _, value = assignment.partition("=")
                        self.env[name] = env[name] = value
                    continue
                started = time.monotonic()
                if words[:3] == ["python", "-m", "mmvet_core"] and not re.search(r"[|&;<>`$]", command):
                    code, text = self.in_process(self.run_cli, words[3:], env)
                else:
                    code, text = self.run_shell(command, env)
                print(f"{time.monotonic() - started:6.1f} s  {command}")      # shown with -rP: where time goes
                printed += text
                self.output += text
                assert code == 0, f"{block.page}:{block.line}: `{command}` exited {code}:\n{text[-3000:]}"
        self.output += printed if block.lang == "python" else ""
        for wanted in block.expect:
            assert wanted in printed, (f"{block.page}:{block.line}: expected {wanted!r} in the output of the "
                                       f"block:\n{printed[-3000:]}")


def plain_score(prompt: str, temperature: float) -> str:
    """A bare score from 0.0 to 1.0, a function of the prompt."""
    return f"{int(hashlib.sha256(prompt.encode('utf-8')).hexdigest()[:8], 16) % 11 / 10:.1f}"


@pytest.fixture(scope="module")
def docs_judge():
    """The endpoint every page talks to (see the module docstring)."""
    state = FakeState.after_gpt4(answer_fn=official_grades_answer(0.1, which="all", otherwise=plain_score))
    with FakeJudgeServer(state) as judge:
        yield judge


@pytest.fixture(scope="module")
def docs_data(tmp_path_factory) -> Path:
    """The data folder (database, exports) every page shares."""
    return tmp_path_factory.mktemp("docs-data")


@pytest.fixture(scope="module")
def services(docs_judge, tmp_path_factory):
    """`NEEDS` started on first use, once per module."""
    started: dict[str, Service] = {}
    with contextlib.ExitStack() as stack:
        def get(name: str) -> Service:
            if name not in NEEDS:
                raise AssertionError(f"unknown need {name!r}: add it to NEEDS in tests/test_docs.py")
            if name not in started:
                started[name] = NEEDS[name](stack, docs_judge, tmp_path_factory)
            return started[name]
        yield get


RUN_PAGES = [p for p, blocks in ALL_BLOCKS.items()
             if any(b.lang in RUN_LANGS and (b.lang == "python" or any(not nr for _, nr in commands_of(b)))
                    for b in blocks)]


@pytest.mark.parametrize("page", RUN_PAGES)
def test_every_command_of_the_page_runs(page, docs_judge, services, docs_data, tmp_path):
    run = PageRun(tmp_path, docs_data, docs_judge, services)
    for block in ALL_BLOCKS[page]:
        if block.lang in RUN_LANGS and not block.not_run:
            run.run_block(block)


# --- what keeps the set of commands honest ----------------------------------------------------------------------
COMMAND_START = re.compile(r"^\s*(\$ |python3? |pip3? |export |curl |bash |huggingface-cli |npx |tests/\S+\.sh)")


def test_commands_are_only_in_run_blocks():
    """A command shown in a text, console or unlabelled fence would escape this test: commands go in bash blocks
    (run, or marked not run), output and layouts in the other fences."""
    stray = [f"{b.page}:{b.line}: {ln.strip()}" for blocks in ALL_BLOCKS.values() for b in blocks
             if b.lang not in RUN_LANGS for ln in b.text.split("\n") if COMMAND_START.match(ln)]
    assert not stray, "commands outside ```bash blocks:\n" + "\n".join(stray)


def test_the_commands_not_run_are_few_and_say_why():
    skipped = [(b.page, b.line, cmd, why) for blocks in ALL_BLOCKS.values() for b in blocks if b.lang == "bash"
               for cmd, why in commands_of(b) if why]
    skipped += [(b.page, b.line, "(python script)", b.not_run) for blocks in ALL_BLOCKS.values() for b in blocks
                if b.lang == "python" and b.not_run]
    print("\n".join(f"not run: {p}:{n}: {c}  <- {w}" for p, n, c, w in skipped))
    assert all(len(w) >= 10 for *_, w in skipped), "each command not run says why"
    assert len(skipped) <= MAX_NOT_RUN, f"{len(skipped)} commands are not run (at most {MAX_NOT_RUN}): {skipped}"
    for page, line, command, _ in skipped:          # a command not run still names files that exist
        for word in command.split():
            if re.fullmatch(r"(bench|tests)/[\w./-]+\.(py|sh)", word):
                assert (ROOT / word).is_file(), f"{page}:{line}: {word} does not exist"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (not ``-`` or ``_``), spaces to ``-``."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
        if in_fence or not (m := re.match(r"^#{1,6}\s+(.*)$", line)):
            continue
        s = slug(m.group(1))
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def test_every_link_between_pages_lands_on_a_page_and_heading():
    broken = []
    for path in PAGES:
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue                                        # https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            rel = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else str(dest)
            if not dest.exists():
                if rel not in ANNOUNCED_PAGES:
                    broken.append(f"{path.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors_of(dest):
                broken.append(f"{path.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_front_page_with_the_map_of_the_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.split("\n")) <= 250
    assert readme.startswith("---\n") and "\nsdk: gradio\n" in readme and "\napp_file: app.py\n" in readme
    assert "CC BY-NC 4.0" in readme                              # the dataset's attribution stays on the front page
    unmapped = [p.name for p in PAGES[1:] if f"(docs/{p.name})" not in readme]
    assert not unmapped, f"pages missing from the README's map: {unmapped}"
    image = re.search(r"!\[[^\]]+\]\(([^)]+\.png)\)", readme)
    assert image and (ROOT / image.group(1)).stat().st_size < 300_000
