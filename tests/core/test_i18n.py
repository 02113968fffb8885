"""Chinese and English: every `_()` key is in both catalogs, translations keep their placeholders, the
language follows DEVTUNE_LANG / --lang / LC_ALL / LC_MESSAGES / LANG, `_()` is only ever given a string
literal, and the CLI speaks Chinese without translating its JSON."""

from __future__ import annotations

import ast
import json
import re
import string
from pathlib import Path

import pytest

from core import i18n
from core.i18n.catalog_keys import SOURCE_DIRS, extract_keys, load, missing

ROOT = Path(__file__).resolve().parents[2]
MACHINES = ROOT / "tests" / "fixtures" / "doctor" / "machines"
# A short help text of the top-level parser: `devtune --help` shows it, whatever the terminal width.
HELP_KEY = "language of messages (default: from $LANG)"
LOCALE_VARS = ("DEVTUNE_LANG", "LC_ALL", "LC_MESSAGES", "LANG")


def _source_files() -> list[Path]:
    return sorted(p for folder in SOURCE_DIRS for p in (ROOT / folder).rglob("*.py"))


# ---- (a) both catalogs are complete --------------------------------------------------------------

def test_every_key_is_in_both_catalogs():
    keys = extract_keys(ROOT)
    assert len(keys) > 500, "extract_keys found too few messages: is the source tree there?"
    gaps = missing(keys)
    report = []
    for lang, items in gaps.items():
        if items:
            shown = "\n".join(f"    {key!r}  ({keys[key]})" for key in items[:25])
            more = f"\n    ... and {len(items) - 25} more" if len(items) > 25 else ""
            report.append(f"{lang}.json lacks {len(items)} of {len(keys)} messages:\n{shown}{more}")
    assert not report, ("\n".join(report) + "\nrun `python -m core.i18n.catalog_keys --update`, then translate what "
                        "core/i18n/locales/zh.json lacks")


def test_english_catalog_is_identity():
    en = load("en")
    assert {k: v for k, v in en.items() if k != v} == {}


# ---- (b) translations keep their placeholders -----------------------------------------------------

def _fields(text: str) -> set[str] | None:
    """The `{name!conv:spec}` fields of a str.format template; None when it is no valid template."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return None
    return {"{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
            for _lit, name, spec, conv in parsed if name is not None}


PERCENT = re.compile(r"%(?:\([a-z_]+\))?[sdr]")  # argparse's own messages and %(default)s in help texts


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_translations_keep_the_placeholders(lang):
    wrong = []
    for key, text in load(lang).items():
        if not text:
            continue
        want, got = _fields(key), _fields(text)
        if want is None:  # literal braces (e.g. a JSON example in a help text): keep them as they are
            want, got = set(re.findall(r"\{[^{}]*\}", key)), set(re.findall(r"\{[^{}]*\}", text))
        if want != got:
            wrong.append(f"{key!r} -> {text!r}: placeholders {sorted(want)} became {sorted(got or ())}")
        if sorted(PERCENT.findall(key)) != sorted(PERCENT.findall(text)):
            wrong.append(f"{key!r} -> {text!r}: %-placeholders differ")
    assert not wrong, "\n".join(wrong)


def test_a_translation_may_reorder_placeholders(monkeypatch):
    monkeypatch.setenv("DEVTUNE_LANG", "zh")
    fake = {"L{line}: duplicate of L{other}": "第 {other} 行的重复：第 {line} 行", "broken {x}": "坏了 {y}"}
    monkeypatch.setattr(i18n, "catalog", lambda lang: fake)
    assert i18n._("L{line}: duplicate of L{other}", line=12, other=3) == "第 3 行的重复：第 12 行"
    assert i18n._("broken {x}", x=1) == "broken 1"  # a bad translation falls back to the English text
    assert i18n._("not translated yet") == "not translated yet"


# ---- (c) the language follows the environment and --lang ------------------------------------------

@pytest.mark.parametrize("env, expected", [
    ({"DEVTUNE_LANG": "zh"}, "zh"),
    ({"DEVTUNE_LANG": "en", "LANG": "zh_CN.UTF-8"}, "en"),
    ({"DEVTUNE_LANG": "fr", "LANG": "zh_CN.UTF-8"}, "zh"),  # an unknown --lang value is no choice
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "zh_TW.UTF-8"}, "zh"),
    ({"LC_ALL": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
    ({"LC_MESSAGES": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "en_US"}, "en"),
    ({"LANG": "C"}, "en"),
    ({"LANG": "C.UTF-8"}, "en"),
    ({}, "en"),
])
def test_language_follows_the_environment(monkeypatch, env, expected):
    for var in LOCALE_VARS:
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert i18n.current_language() == expected


def test_set_language(monkeypatch):
    monkeypatch.setenv("DEVTUNE_LANG", "en")
    i18n.set_language("zh")
    assert i18n.current_language() == "zh"
    with pytest.raises(ValueError):
        i18n.set_language("fr")


@pytest.mark.parametrize("argv, expected", [
    (["--lang", "zh", "doctor"], "zh"),
    (["doctor", "--lang=zh", "--json"], "zh"),
    (["--lang", "zh", "config", "show", "--lang", "en"], "en"),  # the last one wins, as in argparse
    (["doctor", "--json"], None),
    (["--lang", "fr"], None),
    (["chat", "--", "--lang", "zh"], None),
])
def test_lang_is_found_in_argv_before_the_parser_is_built(argv, expected):
    from cli.main import lang_from_argv

    assert lang_from_argv(argv) == expected


def test_main_sets_the_language_before_building_the_parser(monkeypatch):
    import cli.main

    seen = []
    monkeypatch.setenv("DEVTUNE_LANG", "en")

    def build_parser():
        seen.append(i18n.current_language())
        raise SystemExit(0)

    monkeypatch.setattr(cli.main, "build_parser", build_parser)
    monkeypatch.setattr(cli.main, "_localize_argparse", lambda: None)
    with pytest.raises(SystemExit):
        cli.main.main(["doctor", "--lang", "zh", "--help"])
    assert seen == ["zh"]


# ---- (d) `_()` gets a string literal, and nothing is translated before --lang is known ---------------

def test_underscore_is_only_called_with_a_string_literal():
    bad = []
    for path in _source_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_"):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if not node.args:
                bad.append(f"{where}: _() without a message")
                continue
            first = node.args[0]
            if isinstance(first, ast.JoinedStr):
                bad.append(f"{where}: an f-string; pass the values as keyword arguments")
            elif not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                bad.append(f"{where}: {ast.unparse(first)[:60]} is no string literal")
            elif len(node.args) > 1 or any(k.arg is None for k in node.keywords):
                bad.append(f"{where}: values must be keyword arguments")
    assert not bad, "\n".join(bad)


def _translated_at_import(path: Path) -> list[int]:
    """Lines of `_()` calls that run when the module is imported (outside any function or lambda)."""
    lines: list[int] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    visit(default)
            for deco in getattr(node, "decorator_list", []):
                visit(deco)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_":
            lines.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return lines


def test_cli_modules_translate_nothing_at_import():
    """cli/main.py imports these before it reads --lang: their texts must be built in register()."""
    paths = [ROOT / "cli" / "main.py", ROOT / "core" / "i18n" / "__init__.py", *sorted((ROOT / "cli" / "commands").glob("*.py"))]
    found = {str(p.relative_to(ROOT)): _translated_at_import(p) for p in paths}
    assert not {k: v for k, v in found.items() if v}


# ---- (e) the CLI in Chinese ----------------------------------------------------------------------

def _squash(text: str) -> str:
    return "".join(text.split())  # argparse re-wraps help texts


def _cli_env(**extra: str) -> dict[str, str]:
    env = {var: "" for var in LOCALE_VARS}
    env.update(COLUMNS="200", PYTHONIOENCODING="utf-8")
    env.update(extra)
    return env


def test_help_in_chinese(devtune_cli):
    zh = load("zh").get(HELP_KEY)
    assert zh and zh != HELP_KEY, f"core/i18n/locales/zh.json does not translate {HELP_KEY!r} yet"
    for args, env in ((("--lang", "zh", "--help"), _cli_env(DEVTUNE_LANG="en")),
                      (("--help",), _cli_env(LANG="zh_CN.UTF-8"))):
        out = devtune_cli(*args, env=env)
        assert out.returncode == 0, out.stderr
        assert _squash(zh) in _squash(out.stdout), out.stdout
        assert _squash(HELP_KEY) not in _squash(out.stdout)
    out = devtune_cli("--lang", "en", "--help", env=_cli_env(LANG="zh_CN.UTF-8"))
    assert out.returncode == 0 and _squash(HELP_KEY) in _squash(out.stdout)


def test_subcommand_help_in_chinese(devtune_cli):
    key = "run only these categories (repeat, or separate with commas)"
    zh = load("zh").get(key)
    assert zh and zh != key, f"core/i18n/locales/zh.json does not translate {key!r} yet"
    out = devtune_cli("doctor", "--help", "--lang", "zh", env=_cli_env(DEVTUNE_LANG="en"))
    assert out.returncode == 0, out.stderr
    assert _squash(zh) in _squash(out.stdout)


def _shape(value):
    """The JSON's keys and ids, without the words: what a script reading it relies on."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


def test_doctor_json_keys_are_not_translated(devtune_cli):
    machine = str(MACHINES / "mi300x8-cuda-wheel")
    runs = {lang: devtune_cli("--lang", lang, "doctor", "--json", "--replay", machine, env=_cli_env())
            for lang in ("en", "zh")}
    data = {}
    for lang, out in runs.items():
        assert out.returncode == 1, out.stderr  # this recorded machine has a failing check
        data[lang] = json.loads(out.stdout)
    en, zh = data["en"], data["zh"]
    assert _shape(zh) == _shape(en)
    assert [(c["id"], c["category"], c["status"]) for c in zh["checks"]] == \
        [(c["id"], c["category"], c["status"]) for c in en["checks"]]
    assert {k: v for k, v in zh["summary"].items() if isinstance(v, (int, bool))} == \
        {k: v for k, v in en["summary"].items() if isinstance(v, (int, bool))}
