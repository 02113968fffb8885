"""The settings a person can change, as the libraries declare them (core/train/knobs.json, made by
core.train.knob_index from the installed LLaMA-Factory, transformers, PEFT, DeepSpeed and vLLM), looked up by the
names a failure's message uses.

A message names a setting the way its library spells it inside: `max_lora_rank`, `--max-lora-rank`,
"tensor parallel size", `find_unused_parameters=True` (torch's argument, which transformers' TrainingArguments
documents as `ddp_find_unused_parameters`), 'spawn' (a choice of VLLM_WORKER_MULTIPROC_METHOD). `lookup` finds
the settings such a name can mean; `front_end` picks, among settings that mean the same thing, the one the
command the person ran reads (a YAML key of `llamafactory-cli`, a flag of `vllm serve`, an environment variable).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

INDEX = Path(__file__).with_name("knobs.json")
# how a library's own setting is spelled in LLaMA-Factory's YAML (vllm_max_lora_rank, ddp_find_unused_parameters)
COMMANDS = {"infer": "chat/webchat/api/export"}  # the llamafactory-cli commands of each parser
NAMESPACES = {"vllm": "vllm_", "torch": "ddp_", "deepspeed": "deepspeed_"}


@dataclass(frozen=True)
class Knob:
    name: str
    lib: str  # llamafactory, transformers, peft, deepspeed, vllm
    kind: str  # yaml (a key of LLaMA-Factory's YAML), flag (vllm serve), env, peft, deepspeed (its JSON)
    help: str = ""
    default: str | None = None
    flag: str | None = None
    choices: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()  # llamafactory-cli commands whose parser reads the key (train, infer, eval)
    sets: str | None = None  # the library setting this key sets under another name (peft.modules_to_save)
    section: str | None = None  # the JSON object a DeepSpeed key lives in

    def spelled(self, value: str | None = None) -> str:
        """The line a person writes: `key: value`, `--flag value`, `export NAME=value`, a JSON member."""
        shown = value if value is not None else "..."
        if self.kind == "flag":
            if value in ("True", "true"):
                return self.flag or self.name
            return f"{self.flag} {shown}"
        if self.kind == "env":
            return f"export {self.name}={shown}"
        if self.kind == "deepspeed":
            return f'"{self.section}": {{"{self.name}": {_json_value(shown)}}}'
        return f"{self.name}: {_yaml_value(shown)}"

    def where(self) -> str:
        return {"flag": "vllm serve", "env": "environment", "deepspeed": "DeepSpeed JSON", "peft": "PEFT",
                "yaml": "llamafactory-cli " + "/".join(COMMANDS.get(c, c) for c in self.commands)}.get(self.kind,
                                                                                                  self.kind)


def _yaml_value(value: str) -> str:
    return {"True": "true", "False": "false", "None": "null"}.get(value, value)


def _json_value(value: str) -> str:
    return {"True": "true", "False": "false", "None": "null", "true": "true", "false": "false"}.get(
        value, value if re.fullmatch(r"-?[\d.]+", value) else json.dumps(value))


@lru_cache(maxsize=1)
def _index() -> dict:
    return json.loads(INDEX.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def knobs() -> tuple[Knob, ...]:
    data = _index()
    return tuple(Knob(e["name"], e["lib"], e["kind"], e.get("help", ""), e.get("default"), e.get("flag"),
                      tuple(e.get("choices", ())), tuple(e.get("commands", ())), e.get("sets"), e.get("section"))
                 for e in data["knobs"])


def library_version(lib: str) -> str | None:
    """The version of a library the index was generated from ("llamafactory" -> "0.9.5")."""
    text = _index().get("libraries", {}).get(lib) or ""
    m = re.search(re.escape(lib.replace("_", "-")) + r"\S* (\S+)", text)
    return m.group(1) if m else None


@lru_cache(maxsize=1)
def names_and_flags() -> tuple[frozenset[str], dict[str, str]]:
    """Every setting's name (normalised), and each `vllm serve` flag's setting name."""
    return frozenset(normal(k.name) for k in knobs()), {k.flag: k.name for k in knobs() if k.flag}


def normal(name: str) -> str:
    return name.strip("`'\" ").lstrip("-").replace("-", "_").replace(" ", "_").lower()


@lru_cache(maxsize=1)
def _by_name() -> dict[str, list[Knob]]:
    out: dict[str, list[Knob]] = {}
    for k in knobs():
        out.setdefault(normal(k.name), []).append(k)
    return out


@lru_cache(maxsize=1)
def _help_mentions() -> dict[str, list[Knob]]:
    """`identifier` written in backticks in a setting's help -> the settings that document it."""
    out: dict[str, list[Knob]] = {}
    for k in knobs():
        for word in re.findall(r"`{1,2}([A-Za-z_][\w.]*)`{1,2}", k.help):
            if normal(word) != normal(k.name):
                out.setdefault(normal(word), []).append(k)
    return out


def lookup(name: str) -> list[Knob]:
    """The settings this name means: its own spelling, or the setting whose help documents it as its value."""
    key = normal(name)
    own = _by_name().get(key)
    if own:
        return list(own)
    return list(_help_mentions().get(key, [])) if "_" in key else []


def exists(name: str) -> bool:
    return normal(name) in _by_name()


def with_choice(value: str, libs: set[str]) -> list[Knob]:
    """Settings of these libraries that take this value among their declared choices."""
    return [k for k in knobs() if k.lib in libs and value in k.choices and len(k.choices) <= 12]


def equivalents(knob: Knob) -> list[Knob]:
    """The settings that set the same thing as `knob` in another front-end: vLLM's max_lora_rank is
    LLaMA-Factory's vllm_max_lora_rank; PEFT's modules_to_save is LLaMA-Factory's additional_target."""
    out = [knob]
    prefix = NAMESPACES.get(knob.lib, "")
    for k in knobs():
        if k is knob:
            continue
        if k.kind == "yaml" and (k.sets == f"{knob.lib}.{knob.name}" or (prefix and k.name == prefix + knob.name)):
            out.append(k)
        elif knob.kind == "yaml" and knob.sets == f"{k.lib}.{k.name}":
            out.append(k)
        elif k.lib == knob.lib and normal(k.name) == normal(knob.name) and k.kind != knob.kind:
            out.append(k)
    return out


def front_end(candidates: list[Knob], command: str | None) -> Knob:
    """The one the command that failed reads: `vllm serve` -> its flag; llamafactory-cli -> its YAML key (a key
    of this command, then any); else an environment variable, then the first."""
    pool = [e for k in candidates for e in equivalents(k)]
    if command == "vllm":
        order = ("flag", "env", "yaml")
    elif command in ("train", "infer", "eval"):
        order = ("yaml", "env", "deepspeed", "flag")
    else:
        order = ("yaml", "flag", "env", "deepspeed")
    for kind in order:
        of_kind = [k for k in pool if k.kind == kind]
        if kind == "yaml" and command in ("train", "infer", "eval"):
            of_kind.sort(key=lambda k: command not in k.commands)
        if of_kind:
            return of_kind[0]
    return pool[0]
