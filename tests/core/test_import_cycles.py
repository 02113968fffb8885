"""core/ has no import cycles, counting imports inside functions: each module's imports are read from
its source (ast), so an import hidden in a function body cannot hide a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def core_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / "core").rglob("*.py"))}


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The core modules `name` imports anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif target in known:
                    found.add(target)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    mods = core_modules()
    return {name: imports_of(path, name, set(mods)) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_core_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles in core/ (move the shared piece into a leaf module):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function(tmp_path):
    graph = {"core.a": {"core.b"}, "core.b": {"core.c"}, "core.c": {"core.a"}, "core.d": {"core.a"}}
    assert cycles(graph) == [["core.a", "core.b", "core.c"]]
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from core.x import y\n    import core.z\n", encoding="utf-8")
    assert imports_of(src, "core.m", {"core.x", "core.x.y", "core.z", "core.m"}) == {"core.x.y", "core.z"}


def test_no_two_core_modules_share_a_name():
    """A module's name says what it holds, so it is unique in core/ (packages aside)."""
    names: dict[str, list[str]] = {}
    for name, path in core_modules().items():
        if path.name != "__init__.py":
            names.setdefault(name.rpartition(".")[2], []).append(name)
    twice = {leaf: mods for leaf, mods in names.items() if len(mods) > 1}
    assert not twice, f"modules with the same name in core/: {twice}"


def test_one_class_per_name_for_findings():
    owners: dict[str, list[str]] = {}
    for name, path in core_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                owners.setdefault(node.name, []).append(name)
    twice = {cls: mods for cls, mods in owners.items() if len(mods) > 1 and (
        "Finding" in cls or "Diagnosis" in cls or cls in ("Evidence", "Verdict", "Judgement"))}
    assert not twice, f"one name per idea: classes defined in more than one core module: {twice}"
