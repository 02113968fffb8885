"""What the person ran, read from the log: the command (`vllm serve`, `llamafactory-cli train/chat/...`), its
line to re-run with a setting changed, and the two ways a command refuses its own input before doing anything:
LLaMA-Factory's "Some keys are not used by the HfArgumentParser" (keys of another command, or misspelt ones) and
argparse's "unrecognized arguments" (a flag it does not have, matched to the one that means it); and a feature
the run switched on that the library says this model does not support ("Model X does not support LoRA, but LoRA is
enabled"): the switch, and what does the same without it.
"""

from __future__ import annotations

import difflib
import re

from core.i18n import _
from core.train.diagnosis_families import FamilyFinding
from core.train.knobs import Knob, knobs
from core.train.log_facts import shell_commands

COMMAND = re.compile(r"llamafactory-cli\s+(train|chat|webchat|api|export|eval)\b|(\bvllm serve\b|vllm\.entrypoints)")
KIND_OF = {"train": "train", "chat": "infer", "webchat": "infer", "api": "infer", "export": "infer", "eval": "eval"}
LAUNCH_LIBS = {"vllm": {"vllm", "torch"}, "train": {"llamafactory", "transformers", "peft", "deepspeed", "torch"},
               "infer": {"llamafactory", "transformers", "peft", "vllm"}, "eval": {"llamafactory", "transformers"}}
UNUSED = re.compile(r"Some keys are not used by the HfArgumentParser: \[([^\]]*)\]")
def command_of(log_text: str, frames: str = "") -> str | None:
    """What the person ran: vllm (serve), train, infer (chat, webchat, api, export) or eval."""
    found = None
    for m in COMMAND.finditer(log_text + "\n" + frames):
        found = "vllm" if m.group(2) else KIND_OF[m.group(1)]
        if m.group(1):  # llamafactory-cli decides which of its keys apply, even when it serves through vLLM
            return found
    return found


def cli_word(log_text: str) -> str | None:
    m = COMMAND.search(log_text)
    return m.group(1) if m and m.group(1) else None


def ran_line(log_text: str) -> str | None:
    """The command line the log shows the person ran (`$ vllm serve ...`, `$ FORCE_TORCHRUN=1 llamafactory-cli ...`)."""
    for line in log_text.splitlines():
        m = re.match(r"^\s*[$#]\s+(.*\b(?:vllm serve|llamafactory-cli \w+)\b.*)$", line)
        if m:
            return m.group(1).strip()
    for cmd in shell_commands(log_text):  # behind any other prompt (conda's, PowerShell's, zsh's)
        if re.search(r"\b(?:vllm serve|llamafactory-cli \w+)\b", cmd.command):
            return cmd.command
    return None


def rerun_with(knob: Knob, value: str, log_text: str) -> str:
    """The command the person ran, with this setting changed: a flag replaced or added, `key=value` appended to
    llamafactory-cli (it reads such overrides after the YAML), a variable put before it."""
    line = ran_line(log_text)
    if knob.kind == "flag":
        base = line if line and "vllm serve" in line else "vllm serve MODEL"
        pattern = re.compile(re.escape(knob.flag or "") + r"(?:[ =](?!-)\S+)?")
        spelled = knob.spelled(value)
        return pattern.sub(spelled, base, count=1) if pattern.search(base) else f"{base} {spelled}"
    if knob.kind == "env":
        return f"{knob.name}={value} {line}" if line else knob.spelled(value)
    if knob.kind == "yaml":
        base = line if line and "llamafactory-cli" in line else "llamafactory-cli train configs/train.yaml"
        return f"{base} {knob.name}={str(value).lower() if value in ('True', 'False') else value}"
    return knob.spelled(value)


def unused_keys(message: str, log_text: str, command: str | None) -> FamilyFinding | None:
    m = UNUSED.search(message)
    if m is None:
        return None
    keys = re.findall(r"'([\w.-]+)'", m.group(1))
    yaml = {k.name: k for k in knobs() if k.kind == "yaml"}
    word = cli_word(log_text) or command or "train"
    known = [k for k in keys if k in yaml]
    elsewhere = sorted({c for k in known for c in yaml[k].commands if command and command not in yaml[k].commands})
    unknown = [k for k in keys if k not in yaml]
    facts = [_("keys this command does not read: {keys}", keys=", ".join(keys))]
    if known and elsewhere and len(known) >= len(unknown):
        other = "train" if "train" in elsewhere else elsewhere[0]
        facts.append(_("{keys}: keys of `llamafactory-cli {command}`", keys=", ".join(known[:8]), command=other))
        return FamilyFinding(
            "wrong-command-keys", _("A config for `llamafactory-cli {other}` was given to `llamafactory-cli {command}`",
                                    other=other, command=word),
            _("`llamafactory-cli {command}` reads only its own keys, and this file holds keys of `{other}` "
              "({keys}): it is the config of another command.", command=word, other=other,
              keys=", ".join(known[:6])),
            _("Give `{command}` a config of its own keys (for chat, webchat, api and export: model_name_or_path, "
              "adapter_name_or_path, template, finetuning_type, and the export or generation keys), or run this "
              "file with `llamafactory-cli {other}`.", command=word, other=other),
            [f"llamafactory-cli {other} <this config>.yaml"], facts, own_cause=True)
    if not unknown:
        return None
    names = [k.name for k in knobs() if k.kind == "yaml" and (not command or command in k.commands)]
    guesses = {k: difflib.get_close_matches(k, names, n=1, cutoff=0.75) for k in unknown}
    lines = [f"{k} -> {g[0]}" for k, g in guesses.items() if g]
    facts += [_("closest real key: {pairs}", pairs="; ".join(lines))] if lines else []
    return FamilyFinding(
        "wrong-command-keys", _("The config has keys LLaMA-Factory does not know: {keys}", keys=", ".join(unknown)),
        _("LLaMA-Factory stops at a key none of its parsers reads: a misspelt key, or one of another version."),
        _("Rename each key to the one it meant ({pairs}) or remove it.", pairs="; ".join(lines)) if lines else
        _("Remove these keys, or rename them to keys of `llamafactory-cli {command}` (`devtune config check` "
          "lists what is wrong in a config).", command=word),
        ["devtune config check"], facts, own_cause=True)


UNRECOGNIZED = re.compile(r"unrecognized arguments?: (.+)|no such option: (--?[\w-]+)|unknown (?:flag|option): (--?[\w-]+)")


def unknown_flags(message: str, log_text: str, command: str | None) -> FamilyFinding | None:
    """argparse's "unrecognized arguments: --lora-path x": the flags the program has (its --help in the log, else
    vLLM's own when it is vllm), and the closest one to each unknown flag."""
    m = UNRECOGNIZED.search(message)
    if m is None:
        return None
    unknown = [w for w in (m.group(1) or m.group(2) or m.group(3)).split() if w.startswith("-")]
    if not unknown:
        return None
    listed = sorted(set(re.findall(r"^\s{2,}(--[a-z][\w-]+)", log_text, re.M)))
    known = listed or ([k.flag for k in knobs() if k.kind == "flag" and k.flag] if command == "vllm" else [])
    helps = {k.flag: k.help for k in knobs() if k.kind == "flag" and k.flag}
    pairs = {f: _closest_flags(f, known, helps) for f in unknown}
    lines = [f"{f} -> {' / '.join(g)}" for f, g in pairs.items() if g]
    facts = [_("flags it does not have: {flags}", flags=", ".join(unknown))] + (
        [_("closest flags it has: {pairs}", pairs="; ".join(lines))] if lines else [])
    return FamilyFinding(
        "wrong-command-keys", _("The command has flags it does not know: {flags}", flags=", ".join(unknown)),
        _("The program stopped before doing anything: it has no such flag (a flag of another version or "
          "another program, or a misspelling)."),
        _("Use the flag it has ({pairs}) or remove it; `--help` lists them.", pairs="; ".join(lines)) if lines else
        _("Remove the flag, or use the one `--help` lists for it."),
        [f"{'vllm serve' if command == 'vllm' else 'PROGRAM'} --help"], facts, own_cause=True)


def _closest_flags(flag: str, known: list[str], helps: dict[str, str]) -> list[str]:
    """The flags that mean what `flag` seems to: the words they share (in the name, and in the flag's help: `path`
    is in --lora-modules' "name=path"), then the spelling."""
    words = set(re.findall(r"[a-z]+", flag.lower()))

    def score(other: str) -> float:
        mine = set(re.findall(r"[a-z]+", other.lower()))
        said = set(re.findall(r"[a-z]+", helps.get(other, "").lower()))
        return 2 * len(words & mine) + len(words & said - mine) + difflib.SequenceMatcher(None, flag, other).ratio()

    ranked = sorted(known, key=score, reverse=True)[:2]
    return [f for f in ranked if score(f) >= 2.5]


NOT_FOUND = re.compile(r"command not found: ([\w.+-]+)|(?:^|: )([\w.+-]+): command not found(?!:)|"
                       r"^'([\w.+-]+)' (?:is not recognized as an internal or external command|不是内部或外部命令|[^\x00-\x7f]*\ufffd[^\x00-\x7f]*\ufffd[^\x00-\x7f]*\ufffd)|"
                       r"^([\w.+-]+) : The term '[\w.+-]+' is not recognized", re.M)


def command_package(name: str) -> str | None:
    """The distribution whose console script is `name`, from this environment's installed packages' metadata."""
    from importlib.metadata import entry_points

    for ep in entry_points(group="console_scripts"):
        if ep.name == name:
            return ep.dist.name if ep.dist is not None else ep.value.split(".")[0]
    return None


def missing_command(message: str, log_text: str) -> FamilyFinding | None:
    """`bash: llamafactory-cli: command not found`: the package whose command it is, not installed in the
    environment that ran it (or its bin/ not on PATH)."""
    m = NOT_FOUND.search(message)
    if m is None:
        return None
    name = next(g for g in m.groups() if g)
    dist = command_package(name)
    env = re.findall(r"^(/\S+)/bin/python3?\s*$", log_text, re.M)
    facts = [_("command not found: {name}", name=name)]
    if dist:
        facts.append(_("{name} is the command of the package {dist}", name=name, dist=dist))
    if env:
        facts.append(_("the Python of this shell: {env}", env=env[-1]))
    what = dist or _("the package that provides it")
    local = " (" + _("in a source checkout: `pip install -e .`") + ")" if dist in ("llamafactory", "llamafactory-cli") else ""
    return FamilyFinding(
        "missing-command", _("{name} is not installed in this environment", name=name),
        _("The shell found no `{name}`: {what} is not installed in the Python environment this shell uses (installing "
          "only a project's requirements does not install its command), or that environment's bin/ is not on PATH.",
          name=name, what=what),
        _("Install {what} in this environment{local}, or activate the environment that has it; `which {name}` then "
          "finds it.", what=what, local=local, name=name),
        (["pip install -e ." if local else f"pip install {dist}"] if dist else []) + [f"which {name}", "which python"],
        facts, own_cause=True)


UNSUPPORTED = re.compile(r"(?P<what>\b[A-Z][\w.\-]+|this model|the model) does not support (?P<feature>[A-Za-z][\w\- ]{1,40}?)"
                         r"(?:\s+yet)?(?=[,.;:]|\s+but\b|\s+when\b|$)|(?P<feature2>[A-Za-z][\w\-]{1,30}(?: [\w\-]+)?) is not "
                         r"supported (?:for|by|with|on) (?:the )?(?P<what2>[\w.\-]+)")
FLAG_ON = re.compile(r"(?<![\w-])(--[a-z][\w-]+)(?![\w-])")


def _serve_merged(line: str) -> str:
    """The `vllm serve` line the person ran, for the merged folder and without its LoRA flags."""
    if "vllm serve" not in line:
        return "vllm serve <merged folder>"
    served = re.sub(r"\s--(?:enable-lora|lora-modules(?:[ =]\S+)?|max-lora-rank[ =]\S+)", "", line)
    return re.sub(r"(vllm serve)\s+(?!-)\S+", r"\1 <merged folder>", served, count=1)


LORA_MODULES = re.compile(r"expected target modules in \{([^}]*)\} but received \[([^\]]*)\]")


def _lora_modules(message: str, log_text: str) -> FamilyFinding | None:
    """vLLM serves LoRA on some modules only; an adapter with others (an embedding, lm_head, a tool's own names)
    is refused: merged into the model, it needs no LoRA support at all."""
    m = LORA_MODULES.search(message)
    if m is None:
        return None
    allowed = sorted(set(re.findall(r"'([\w.]+)'", m.group(1))))
    got = sorted(set(re.findall(r"'([\w.]+)'", m.group(2))) - set(allowed))
    line = ran_line(log_text) or ""
    return FamilyFinding(
        "unsupported-feature", _("The adapter has LoRA weights on modules the server cannot load: {modules}",
                                 modules=", ".join(got)),
        _("The server applies LoRA to {allowed} only, and the adapter also trains {modules} (an embedding, the "
          "output layer or a tool's own module names), so it refuses the adapter.", allowed=", ".join(allowed),
          modules=", ".join(got)),
        _("Merge the adapter into the model (`devtune merge`, or the training tool's own merge script) and serve the "
          "merged folder without --enable-lora; or train the adapter on the modules the server takes "
          "(lora_target: {allowed}).", allowed=",".join(allowed)),
        ["devtune merge", _serve_merged(line)],
        [_("the server takes LoRA on: {modules}", modules=", ".join(allowed)),
         _("the adapter has: {modules}", modules=", ".join(got))], own_cause=True)


def unsupported_feature(message: str, log_text: str, command: str | None) -> FamilyFinding | None:
    """A feature the library says this model does not support, switched on by a flag or key of this run."""
    found = _lora_modules(message, log_text)
    if found is not None:
        return found
    m = UNSUPPORTED.search(message)
    if m is None:
        return None
    what = m.group("what") or m.group("what2")
    feature = (m.group("feature") or m.group("feature2")).strip()
    token = re.sub(r"[\s\-]+", "_", feature.lower())
    libs = LAUNCH_LIBS.get(command or "", set())
    line = ran_line(log_text) or ""
    used = set(FLAG_ON.findall(line)) | {f"{k}" for k in re.findall(r"\b(\w+)=True\b", log_text)}
    switches = [k for k in knobs() if (not libs or k.lib in libs) and re.search(r"(?:^|_)" + re.escape(token) + r"(?:_|$)",
                                                                                 k.name)
                and (k.flag in used or k.name in used)]
    if not switches:
        return None
    knob = switches[0]
    spelled = knob.flag or f"{knob.name}: true"
    facts = [_("the library: {what} does not support {feature}", what=what, feature=feature),
             _("this run switches it on: {setting}", setting=spelled)]
    fix = _("Turn {feature} off for this model (drop {setting}), or use a release of {lib} whose {what} supports "
            "it.", feature=feature, setting=spelled, lib=knob.lib, what=what)
    commands = [line.replace(" " + spelled, "") if line else f"# without {spelled}"]
    if "lora" in token:
        fix = _("Serve the adapter merged into the model instead: merge it (`devtune merge`, or `llamafactory-cli "
                "export` with adapter_name_or_path) and serve the merged folder without {setting}; or use a release "
                "of {lib} whose {what} supports LoRA.", setting=spelled, lib=knob.lib, what=what)
        commands = ["devtune merge", _serve_merged(line)]
    return FamilyFinding("unsupported-feature", _("{what} does not support {feature}, and this run turns it on",
                                                  what=what, feature=feature),
                         _("The library refuses the combination: {what} has no {feature}, and {setting} asks for "
                           "it (\"{said}\").", what=what, feature=feature, setting=spelled, said=message[:200]),
                         fix, commands, facts, own_cause=True)


CLAP_VALUE = re.compile(r"invalid value '([^']*)' for '(--[\w-]+)(?: <[^>]*>)?'")
INVALID_CHOICE = re.compile(r"argument ([\w/-]+): invalid choice: '([^']*)' \(choose from ([^)]*)\)")
# llama.cpp's quantization types that only llama-quantize makes (its converter writes f32/f16/bf16/q8_0 and tq*)
QUANTIZE_ONLY = re.compile(r"(?i)^(?:q[2-6]_k(?:_[sml])?|iq[1-4]_\w+|q4_[01]|q5_[01])$")


def invalid_choice(message: str, log_text: str) -> FamilyFinding | None:
    """argparse's "argument --outtype: invalid choice: 'q4_k_m' (choose from ...)": the choices, the closest, and
    for llama.cpp's converter, that k-quants are made by llama-quantize after an f16 conversion."""
    m = INVALID_CHOICE.search(message)
    clap = CLAP_VALUE.search(message) if m is None else None
    if m is None and clap is None:
        return None
    if clap is not None:  # Rust's clap (text-generation-launcher): the choices follow on the next lines
        flag, value = clap.group(2), clap.group(1)
        possible = re.search(r"\[possible values: ([^\]]*)\]", log_text[log_text.find(clap.group(0)):] or log_text)
        if possible is None:
            return None
        listed = possible.group(1)
    else:
        flag, value, listed = m.group(1), m.group(2), m.group(3)
    choices = re.findall(r"'([^']*)'", listed) or [c.strip() for c in listed.split(",")]
    variable = flag.lstrip("-").upper().replace("-", "_")
    if re.search(r"(?m)^\s*(?:export\s+|set\s+|\$env:)?" + re.escape(variable) + r"\s*=\s*['\"]?" + re.escape(value),
                 log_text):  # the value came from the flag's environment variable (clap's `env`)
        return FamilyFinding(
            "wrong-command-keys", _("{variable}={value} is not a value {flag} takes", variable=variable, value=value,
                                    flag=flag),
            _("The program reads {flag} from the variable {variable}, and {value} is none of {choices}.",
              flag=flag, variable=variable, value=value, choices=", ".join(choices)),
            _("Set {variable} to one of {choices} (`export {variable}={first}`), or unset it.", variable=variable,
              choices=", ".join(choices), first=next((c for c in choices if c.lower() == value.lower()), choices[0])),
            [f"export {variable}={next((c for c in choices if c.lower() == value.lower()), choices[0])}"],
            [_("{flag} takes one of: {choices}", flag=flag, choices=", ".join(choices)),
             _("given: {value}", value=f"{variable}={value}")], own_cause=True)
    close = difflib.get_close_matches(value.lower(), [c.lower() for c in choices], n=2, cutoff=0.5)
    facts = [_("{flag} takes one of: {choices}", flag=flag, choices=", ".join(choices)),
             _("given: {value}", value=value)]
    program = re.search(r"([\w.\-]+\.py|[\w.\-]+): error: argument", message)
    name = program.group(1) if program else "the program"
    if QUANTIZE_ONLY.match(value) and ("gguf" in (name + log_text).lower() or "llama.cpp" in log_text):
        base = "f16" if "f16" in choices else "bf16"
        return FamilyFinding(
            "wrong-command-keys", _("{value} is a type of llama-quantize, not of the converter", value=value),
            _("{name} writes only {choices}; {value} (a k-quant or i-quant) is made from such a GGUF by llama.cpp's "
              "llama-quantize.", name=name, choices=", ".join(choices), value=value),
            _("Convert with {flag} {base}, then quantize that file: `llama-quantize model-{base}.gguf "
              "model-{value}.gguf {upper}` (devtune merge --gguf --quant does both).", flag=flag, base=base,
              value=value.lower(), upper=value.upper()),
            [f"python convert_hf_to_gguf.py MODEL {flag} {base} --outfile model-{base}.gguf",
             f"llama-quantize model-{base}.gguf model-{value.lower()}.gguf {value.upper()}"], facts, own_cause=True)
    return FamilyFinding(
        "wrong-command-keys", _("{flag} does not take {value}", flag=flag, value=value),
        _("{name} stopped before doing anything: {flag} takes one of {choices}.", name=name, flag=flag,
          choices=", ".join(choices)),
        _("Give {flag} one of its choices{closest}.", flag=flag,
          closest=_(" (closest: {names})", names=", ".join(close)) if close else ""),
        [f"{name} --help"], facts, own_cause=True)
