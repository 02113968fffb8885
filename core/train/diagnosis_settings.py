"""Failure families reasoned from the settings of the libraries (core.train.knobs: what LLaMA-Factory,
transformers, PEFT, DeepSpeed and vLLM declare about each setting they read), for failures no rule was written for:

- setting-documented-cause: a setting this run changed from its default whose own documentation warns of what
  failed ("save_only_model: Prevents resuming training from checkpoint" when resuming fails). Ranked first: the
  run's own setting, documented to do this, is the cause.
- wrong-command-keys (core.train.diagnosis_commands): keys or flags the command does not read.
- named-setting: the message names a setting (`max_lora_rank`, "tensor parallel size", `find_unused_parameters=`,
  a choice such as 'spawn') and what it needs (a comparison solved for it, two settings that cannot go together):
  the line that sets it in the front-end this person ran (a YAML key, a `vllm serve` flag, a variable).
- hardware-limit: a library refuses this GPU: the setting that chooses it, turned off.
- old-release: an old LLaMA-Factory failing in its own code (an assertion, a wrong call; never a validation
  message, never the machine): update first.
- library-advice: no setting is named, but the library says what to do ("Please use FORCE_TORCHRUN=1"): its words.

The readings of the message are core.train.setting_mentions'; these only decide and word the diagnosis.
"""

from __future__ import annotations

import re

from core.i18n import _
from core.train.diagnosis_commands import (LAUNCH_LIBS, command_of, invalid_choice, missing_command, rerun_with,
                                          unknown_flags, unsupported_feature, unused_keys)
from core.train.diagnosis_families import SITE, FamilyFinding
from core.train.knobs import Knob, front_end, knobs, names_and_flags, normal
from core.train.setting_mentions import WORDS, advice_of, read, sentences

YAML_LINE = re.compile(r"^\s*([a-z][a-z0-9_]+):[ \t]+([^\s#][^#\n]*?)[ \t]*(?:#.*)?$", re.M)
CLI_ARG = re.compile(r"(?<![\w-])([a-z][a-z0-9_]+)=([^\s]+)")
FLAG_ARG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]+)(?:[ =]([^\s-][^\s]*))?")
WARNS = re.compile(r"(?i)\b(?:prevents?|cannot|can't|won't|will not|not be able|unable|disables?|only|note|warning|"
                   r"must not|incompatible|requires?|not supported|breaks?|lose|loses)\b")
STOP = {"this", "that", "with", "from", "when", "will", "have", "been", "your", "into", "only", "note", "which",
        "there", "their", "these", "those", "than", "then", "they", "also", "must", "should", "would", "could",
        "after", "before", "while", "using", "used", "enable", "enabled", "whether", "value", "default", "true",
        "false", "none", "error", "valid", "find", "found", "file", "path", "model", "training", "trainer"}


def libraries_of(frames: str, log_text: str, command: str | None) -> set[str]:
    found = {m.group(1).lower() for m in SITE.finditer(frames)}
    return found | LAUNCH_LIBS.get(command or "", set())


def shown_settings(log_text: str, args: dict) -> dict[str, str]:
    """The settings this run had: its YAML (from its record), else what the log shows of it (a `cat` of the
    YAML, `key=value` on the llamafactory-cli line, `--flag value` on the vllm line); only real setting names."""
    names, flags = names_and_flags()
    out: dict[str, str] = {}
    for m in YAML_LINE.finditer(log_text):
        if m.group(1) in names:
            out.setdefault(m.group(1), m.group(2).strip().strip("'\""))
    for line in log_text.splitlines():
        if "llamafactory-cli" in line:
            out.update({k: v for k, v in CLI_ARG.findall(line) if k in names})
        if "vllm serve" in line:
            out.update({flags[f]: v or "true" for f, v in FLAG_ARG.findall(line) if f in flags})
    out.update({k: str(v) for k, v in (args or {}).items()})
    return out


def settings_first_finding(root: str, frames: str, *, log_text: str = "", settings=None, **_kw) -> FamilyFinding | None:
    """Before the other families: a setting of this run documented to cause this failure."""
    return _documented_cause(root, frames, log_text, getattr(settings, "args", None) or {})


def settings_finding(root: str, frames: str, *, log_text: str = "", **_kw) -> FamilyFinding | None:
    """After the other families: what the message says about settings, or what the library says to do."""
    command = command_of(log_text, frames)
    message = _message(root)
    return (unused_keys(message, log_text, command)
            or missing_command(message, log_text)
            or unknown_flags(message, log_text, command)
            or invalid_choice(message, log_text)
            or unsupported_feature(message, log_text, command)
            or _named(message, frames, log_text, command)
            or _hardware_limit(message, frames, log_text, command)
            or (_old_release(frames, log_text) if INTERNAL.match(_bare(root)) and not MACHINE_ERROR.search(root)
                else None)
            or _advice(message))


def _bare(root: str) -> str:
    """The root line without a rank's prefix."""
    return re.sub(r"^\[?[\w-]+\]?:\s*", "", root.strip()) if re.match(r"^\[?(?:rank|default)\d+\]?:", root.strip()) \
        else root.strip()


def _message(root: str) -> str:
    return re.sub(r"^(?:\[?[\w.]+\]?:\s*)?(?:[\w.]+(?:Error|Exception|Warning)):\s*", "", root.strip())


def _named(message: str, frames: str, log_text: str, command: str | None) -> FamilyFinding | None:
    libs = libraries_of(frames, log_text, command)
    reading = read(message, libs)
    if not reading.mentions:
        return None
    first = reading.mentions[0]
    knob = front_end(first.knobs, command)
    value = reading.wanted or first.value
    shown = shown_settings(log_text, {})
    now = shown.get(knob.name) or shown.get(first.knobs[0].name) or reading.current
    facts = [_("the setting named: `{name}` ({lib}; set as {where})", name=first.text, lib=first.knobs[0].lib,
               where=knob.where())]
    if knob.help:
        facts.append(_("its documentation: {text}", text=knob.help[:300]))
    if now is not None:
        facts.append(_("its value in this run: {value}", value=now))
    said = (reading.why or next(iter(sentences(message)), message))[:300]
    if reading.conflict:
        other = next(m for m in reading.mentions[1:] if m.how in ("name", "documented"))
        second = front_end(other.knobs, command)
        return FamilyFinding(
            "named-setting", _("Two settings that cannot go together: `{a}` and `{b}`", a=knob.name, b=second.name),
            _("The message says these settings exclude each other: {said}", said=said[:300]),
            _("Keep one of them: remove `{a}` or `{b}` from the config ({where}) and run it again.", a=knob.name,
              b=second.name, where=knob.where()),
            [f"grep -n -E '^({knob.name}|{second.name}):' configs/*.yaml"], facts, own_cause=True)
    if value is None and not reading.advice:
        return None
    if value is not None:
        line = knob.spelled(value)
        extra = (_("; other values that satisfy it: {values}", values=", ".join(map(str, reading.options)))
                 if reading.options else "")
        fix = _("Set `{line}` ({where}) and run it again{extra}.", line=line, where=knob.where(), extra=extra)
        commands = [rerun_with(knob, value, log_text)]
    else:
        fix = _("The library says: \"{advice}\" The setting is `{line}` ({where}).", advice=" ".join(reading.advice),
                line=knob.spelled(), where=knob.where())
        commands = [knob.spelled()]
    if reading.advice and value is not None:
        fix += " " + _("The library says: \"{advice}\"", advice=" ".join(reading.advice))
    return FamilyFinding(
        "named-setting", _("The error names the setting `{name}`: {said}", name=knob.name, said=said[:160]),
        _("{lib} stopped on its setting `{name}`: {said} The value decides whether this can run, so it is "
          "the thing to change.", lib=first.knobs[0].lib, name=first.knobs[0].name, said=said),
        fix, commands, facts, own_cause=True)


HW_LIMIT = re.compile(r"(?i)\bonly supports? (?P<a>[^.]{3,60}?)(?: GPUs?)? (?:or|and) (?:newer|later|above)\b|"
                      r"\bnot supported on (?:this |the |your )?(?P<b>(?:GPU|device|architecture|platform|gfx\w+|"
                      r"sm_?\d+)[^.]{0,30})|\brequires? (?:an? )?(?P<c>(?:GPU|compute capability|architecture|"
                      r"gfx\w+|sm_?\d+)[^.]{0,40})")
OFF = ("disabled", "none", "off", "false", "False")


def _hardware_limit(message: str, frames: str, log_text: str, command: str | None) -> FamilyFinding | None:
    """A library refuses this GPU ("FlashAttention only supports AMD MI200 GPUs or newer"): the setting that
    chooses that library, turned to a choice that does not use it."""
    m = HW_LIMIT.search(message)
    if m is None:
        return None
    needs = next(g for g in m.groups() if g).strip()
    libs = [x.group(1).lower() for x in SITE.finditer(frames)]
    lib = next((x for x in reversed(libs) if x not in ("torch", "transformers", "llamafactory", "accelerate",
                                                        "peft", "vllm")), None)
    if lib is None:
        return None
    squashed = lib.replace("_", "")
    chooser = [k for k in knobs() if k.kind == "yaml" and (normal(k.name) == lib or lib in normal(k.name)
                                                          or squashed in k.help.lower().replace(" ", "").replace("-", ""))]
    if not chooser:
        return None
    knob = min(chooser, key=lambda k: (normal(k.name) != lib, lib not in normal(k.name)))
    off = next((c for c in knob.choices if c in OFF), None) or ("false" if knob.default in ("True", "False") else None)
    if off is None:
        return None
    acronym = "".join(part[0] for part in lib.split("_") if part)
    others = [c for c in knob.choices if c not in (off, "auto", knob.default) and not c.startswith(acronym)]
    elsewhere = "\n".join(line for line in log_text.splitlines() if needs not in line)
    gpu = re.search(r"\b(gfx[0-9a-f]{3,4}|MI\d{2,3}X?|[AHV]100|A10G?|T4|L4|L40S?|RTX \w+)\b", elsewhere)
    facts = [_("the library that refused: {lib} (innermost frame)", lib=lib),
             _("it needs: {needs}", needs=needs)] + ([_("this GPU: {gpu}", gpu=gpu.group(1))] if gpu else [])
    also = _(" (or another of its choices: {choices})", choices=", ".join(others)) if others else ""
    return FamilyFinding(
        "hardware-limit", _("{lib} does not run on this GPU: it needs {needs}", lib=lib, needs=needs),
        _("The run chose {lib} (the setting `{name}`), and {lib} refuses this GPU: \"{said}\" No setting of "
          "{lib} changes that; the run must not use it here.", lib=lib, name=knob.name, said=message[:200]),
        _("Set `{line}`{also} and run it again, or train on a GPU it supports ({needs}).", line=knob.spelled(off),
          also=also, needs=needs),
        [rerun_with(knob, off, log_text)], facts, own_cause=True)


# an error of the machine (the OS's errno, the GPU runtime, memory), which no release of the code causes
MACHINE_ERROR = re.compile(r"\(os error \d+\)|\[Errno \d+\]|\b(?:CUDA|HIP|NCCL|RCCL|cuDNN|MIOpen|HSA)\b.{0,20}"
                           r"(?:error|failure)|out of memory|\bKilled\b|Segmentation fault|Bus error", re.I)
# an error of the code itself (an assertion, a missing attribute, a wrong call), not a validation that says what
# is wrong with the input (a ValueError "column X not in the dataset", "Unrecognized configuration class")
INTERNAL = re.compile(r"(?:[\w.]+\.)?(?:AssertionError|AttributeError|TypeError|IndexError|KeyError|"
                      r"NotImplementedError|UnboundLocalError|NameError|RuntimeError)\b")
RENAMED = {"llmtuner": "0.7", "llama-efficient-tuning": "0.1", "llama_efficient_tuning": "0.1"}  # LLaMA-Factory's names before 0.8


def _old_release(frames: str, log_text: str) -> FamilyFinding | None:
    """The run's LLaMA-Factory is a release (or a checkout) well behind the one devtune is built against, and the
    failure passes through its code: an error of an old release's own code path is most often fixed upstream."""
    from packaging.version import InvalidVersion, Version

    from core.train.diagnosis_signature import package_of, pip_versions
    from core.train.knobs import library_version

    known = library_version("llamafactory")
    if known is None:
        return None
    packages = {package_of(p) for p in re.findall(r'File "([^"]+)"', frames)}
    ours = packages & {"llamafactory", "llmtuner"} or {p for p in RENAMED if p in frames.lower()}
    if not ours:
        return None
    printed = pip_versions(log_text)
    version = printed.get("llamafactory") or printed.get("llmtuner")
    name = next(iter(sorted(ours)))
    try:
        have = Version(version or RENAMED.get(name, ""))
    except InvalidVersion:
        return None
    if (have.major, have.minor) >= (Version(known).major, Version(known).minor - 1):
        return None
    date = re.search(r"^[0-9a-f]{7,40} (\d{4}-\d{2}-\d{2})\s*$", log_text, re.M)
    facts = [_("LLaMA-Factory of this run: {name} {version}", name=name, version=version or _("before 0.8")),
             _("the release devtune is built against: {version}", version=known)]
    if date:
        facts.append(_("the checkout's last commit: {date}", date=date.group(1)))
    return FamilyFinding(
        "old-release", _("An old LLaMA-Factory ({name} {version}) failed in its own code path", name=name,
                         version=version or _("before 0.8")),
        _("The error is raised on a path through LLaMA-Factory's code, and this LLaMA-Factory is several releases "
          "behind {known}; no rule explains it, and failures of an old release's own code (unsupported "
          "combinations, bugs) are most often fixed upstream since.", known=known),
        _("Update LLaMA-Factory (in a git checkout: `git pull` then `pip install -e .`; else `pip install -U "
          "llamafactory`) and run the same config again; if it still fails, the diagnosis of the new log is "
          "about this run."),
        ["git pull && pip install -e .", "pip install -U llamafactory"], facts, own_cause=True)


def _advice(message: str) -> FamilyFinding | None:
    advice = advice_of(message)
    if not advice:
        return None
    statement = next((s for s in sentences(message) if s not in advice), message)[:200]
    return FamilyFinding(
        "library-advice", _("The library says what to do: {advice}", advice=advice[0][:160]),
        _("The error is one its library explains itself: {statement}", statement=statement),
        _("Do what the message says: \"{advice}\"; then run it again.", advice=" ".join(advice)),
        [], [_("the library's advice: {advice}", advice=a) for a in advice], own_cause=True)


def _stems(text: str) -> set[str]:
    out = set()
    for w in WORDS.findall(text.replace("_", " ")):
        w = w.lower()
        if len(w) < 4 or w in STOP:
            continue
        out.add(re.sub(r"(?:ing|ed|es|e|s)$", "", w) or w)
    return out


def _documented_cause(root: str, frames: str, log_text: str, args: dict) -> FamilyFinding | None:
    shown = shown_settings(log_text, args)
    if not shown:
        return None
    root_words = _stems(_message(root))
    context = root_words | _stems(_code_of(frames))
    by_name = {k.name: k for k in knobs() if k.kind in ("yaml", "flag")}
    best: tuple[int, Knob, str, str] | None = None
    for name, value in shown.items():
        knob = by_name.get(name)
        if knob is None or _same(value, knob.default):
            continue
        for sentence in sentences(knob.help):
            if not WARNS.search(sentence):
                continue
            shared = _stems(sentence) & context
            if len(shared) >= 2 and shared & root_words and (best is None or len(shared) > best[0]):
                best = (len(shared), knob, value, sentence)
    if best is None:
        return None
    _n, knob, value, sentence = best
    line = knob.spelled(value)
    return FamilyFinding(
        "setting-documented-cause", _("This run's setting `{line}` is documented to cause this", line=line),
        _("The run set `{name}` to {value} (its default: {default}), and its documentation says: \"{doc}\" That is "
          "what failed here.", name=knob.name, value=value, default=knob.default, doc=sentence),
        _("Set `{name}` back to {default} for the runs that need what it prevents, or keep it and do not ask for "
          "that (its documentation, above, says what it rules out).", name=knob.name, default=knob.default),
        [knob.spelled(knob.default or "...")],
        [_("the run's setting: {line} (default {default})", line=line, default=knob.default),
         _("its documentation: {text}", text=knob.help[:300])], own_cause=True, contradiction=True)


def _code_of(frames: str) -> str:
    """The functions and source lines of a traceback, without its file paths."""
    out = []
    for line in frames.splitlines():
        m = re.search(r'File "[^"]*", line \d+, in (\w+)', line)
        out.append(m.group(1) if m else line if not re.search(r'File "', line) else "")
    return "\n".join(out)


def _same(value: str, default: str | None) -> bool:
    norm = {"true": "True", "false": "False", "null": "None", "~": "None"}
    return norm.get(str(value).lower(), str(value)) == norm.get(str(default).lower(), str(default))
