"""No import circles in `mmvet_core/` and `ui/`: data flows one way (the judge check produces a record, the
estimate is a pure function of it and a run's scores, runs read neither; views get each other's components from
app.py, never by importing each other). Every import counts, also one inside a function or under TYPE_CHECKING:
a circle hidden in a function is still a circle."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mmvet_core", "mmvet_app")


def module_files(root: Path, packages=PACKAGES) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__) for every .py file of `packages` under `root`."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def imported_modules(name: str, is_package: bool, tree: ast.AST, known) -> set[str]:
    """The modules of `known` that module `name` imports anywhere in its `tree` (relative imports resolved; ``from
    package import module`` counts as importing that module)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            targets = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:      # mmvet_core.x.y -> the nearest module we have
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    known = module_files(root, packages)
    return {name: imported_modules(name, is_package, ast.parse(path.read_text(encoding="utf-8")), known)
            for name, (path, is_package) in known.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted; [] when the graph has no
    circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def test_mmvet_core_and_ui_have_no_import_circle():
    graph = import_graph()
    assert "mmvet_core.service.runs" in graph and "mmvet_app.grade" in graph        # the walk found the modules
    circles = import_circles(graph)
    detail = ["  " + " ; ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in circles]
    assert circles == [], "import circles:\n" + "\n".join(detail)


def test_a_circle_through_a_function_level_import_is_found(tmp_path):
    """The detector itself: the shape of the equivalence -> judgecheck -> runs -> equivalence circle it guards."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "equivalence.py").write_text("from .judgecheck import Result\n")
    (pkg / "judgecheck.py").write_text("def check():\n    from .runs import create_run\n")
    (pkg / "runs.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                 "    from pkg import equivalence\n")
    (pkg / "leaf.py").write_text("import pkg.runs\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.leaf"] == {"pkg.runs"}
    assert import_circles(graph) == [["pkg.equivalence", "pkg.judgecheck", "pkg.runs"]]
    (pkg / "runs.py").write_text("")
    assert import_circles(import_graph(tmp_path, ("pkg",))) == []
