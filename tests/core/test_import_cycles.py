"""No package has an import cycle, and no layer imports one above it, counting imports inside functions:
each module's imports are read from its source (ast), so an import hidden in a function body cannot hide a
cycle or a layer break.

The layers (DESIGN.md): core <- cli; core <- tui/widgets <- screens <- tui (the app); cli may open the app
(its wizard command) and nothing else of tui; core imports neither Textual nor rich, nor any front-end."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PACKAGES = ("core", "cli", "tui", "screens")


def core_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / "core").rglob("*.py"))}


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imported_names(path: Path) -> set[str]:
    """Every absolute module name `path` imports anywhere (functions included), as written."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


# (who, what it must not import, the exceptions allowed): prefixes of dotted module names
LAYER_RULES = (
    ("core", ("cli", "tui", "screens", "textual", "textual_plotext", "rich"), ()),
    ("cli", ("tui", "screens", "textual", "textual_plotext", "rich"),
     ("cli.commands.wizard -> tui.app", "cli.commands.wizard -> tui.terminal")),
    ("tui.widgets", ("screens", "cli"), ()),
    ("screens", ("cli",), ()),
    ("tui", ("cli",), ()),
)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_breaks(modules: dict[str, Path]) -> list[str]:
    out = []
    for name, path in modules.items():
        for who, banned, allowed in LAYER_RULES:
            if not _under(name, who):
                continue
            for target in sorted(imported_names(path)):
                edge = f"{name} -> {target}"
                if any(_under(target, b) for b in banned) and not any(
                        edge == a or edge.startswith(a + ".") for a in allowed):
                    out.append(edge)
    return out


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


def import_graph(mods: dict[str, Path] | None = None) -> dict[str, set[str]]:
    mods = core_modules() if mods is None else mods
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


def test_no_package_has_an_import_cycle():
    found = cycles(import_graph(all_modules()))
    assert not found, "import cycles (move the shared piece into a leaf module):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_no_layer_imports_one_above_it():
    found = layer_breaks(all_modules())
    assert not found, "layer breaks (DESIGN.md, Rules of the house):\n" + "\n".join(found)


def test_the_layer_check_finds_a_break_hidden_in_a_function(tmp_path):
    (tmp_path / "w.py").write_text("def f():\n    from screens import steps\n", encoding="utf-8")
    (tmp_path / "c.py").write_text("def f():\n    import textual.app\n", encoding="utf-8")
    (tmp_path / "z.py").write_text("def f():\n    from tui.app import DevtuneApp\n", encoding="utf-8")
    found = layer_breaks({"tui.widgets.w": tmp_path / "w.py", "core.c": tmp_path / "c.py",
                          "cli.commands.wizard": tmp_path / "z.py", "cli.commands.data": tmp_path / "z.py"})
    assert found == ["tui.widgets.w -> screens", "core.c -> textual.app", "cli.commands.data -> tui.app"]


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
