"""Chinese with no English left (issue 21, finding 12): every Chinese catalog string, and what the commands
print under `--lang zh`, holds no English word except names (of tools, libraries, formats, hardware),
paths, identifiers, placeholders, commands in backticks and quoted tool output (which then sits inside a
Chinese sentence saying what it is)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from core.i18n.catalog_keys import extract_keys, load
from core.train.runs import RunStatus
from tests.core.config_workspace import fake_model, register_dataset
from tests.recorded_runs import place_recorded_run
from cli.main import main

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"

# Names and terms written in Latin letters in Chinese technical text: tools, libraries, formats, hardware,
# and the few ML terms Chinese practitioners write in English (token, batch, epoch, loss, ...).
NAMES = set("""
devtune torch vLLM vllm bitsandbytes Python Instinct Hub Hugging Face amdsmi gfx amdgpu llamafactory alpaca
sharegpt openai hipcc ninja rocminfo torchrun torchaudio transformers datasets accelerate peft trl Triton
hipconfig chrF curl sdpa logits token tokens batch epoch loss offload rank wheel stage json jsonl csv tsv txt
parquet arrow yaml safetensors tokenizer uvicorn matplotlib iommu render video root shell Linux Windows
Matrix Core NVIDIA AMD Slurm srun sbatch torchtune pip conda docker podman kernel dmesg tqdm lora qlora
full freeze llama qwen mistral gemma bin api export train chat serve verify doctor config data lint fix
convert register stats merge monitor runs resume stop diagnose demo init show check command presets edit
instruction input output system prompt response conversations messages role content from value user
assistant columns tags formatting sharegpt messages auto true false yes none null dict import module
bit cmake nvcc python worker cache Jinja logit gated rendezvous pyarrow rccl pytorch bashrc huggingface killer
fused Adam supervisor traceback schema alpha dropout ptrace Enter Esc Lines stdout stderr pid cpu
platform access rocm nvidia env libraries serving multigpu toolchain Markdown Word docx html pdf chatlog
xlsx xls ods pptx epub
Ollama Modelfile Container Toolkit Kubernetes unsloth Tensile axolotl
""".split())

PLACEHOLDER = re.compile(r"\{[^{}]*\}|%\(\w+\)[srd]")
FLAG = re.compile(r"(?<![\w.-])--?[A-Za-z][\w-]*(?:=[^\s，。；）)]*)?")
KEY_OR_CALL = re.compile(r"\b[A-Za-z_][\w]*(?=:\s|\()")  # a YAML key (`template: x`) or a call (`abort()`)
BACKTICKS = re.compile(r"`[^`]*`")
QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'|“[^”]*”|‘[^’]*’|「[^」]*」")
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.\-/+:=*<>@%]*")


def english_left(text: str) -> list[str]:
    """The English words of `text` that are no name, identifier, path or quotation."""
    text = QUOTED.sub(" ", BACKTICKS.sub(" ", PLACEHOLDER.sub(" ", text)))
    text = KEY_OR_CALL.sub(" ", FLAG.sub(" ", text))
    left = []
    for word in WORD.findall(text):
        bare = word.rstrip(".:")
        if (len(bare) < 3 or bare in NAMES or bare.lower() in NAMES or any(c in bare for c in "_./-+=:*<>@%0123456789")
                or bare.isupper() or any(c.isupper() for c in bare[1:])):
            continue  # identifiers, paths, flags, versions, acronyms (GPU, ROCm), CamelCase names (DeepSpeed)
        left.append(bare)
    return left


def test_english_left_finds_english_and_spares_names():
    assert english_left("failed with exit code {code}") == ["failed", "with", "exit", "code"]
    assert english_left("运行 {id} 失败；`devtune diagnose {id}` 可解读日志，torch 与 DeepSpeed、saves/x") == []
    assert english_left("LLaMA-Factory 的警告（英文原文）：\"Your setup doesn't support bf16\"") == []


def test_every_chinese_catalog_string_is_chinese():
    keys = extract_keys(ROOT)
    zh = load("zh")
    bad = []
    for key, where in sorted(keys.items(), key=lambda kv: kv[1]):
        if not zh.get(key):
            continue  # a missing translation is test_i18n's to report
        left = english_left(zh[key])
        if left:
            bad.append(f"{where}: {left}  | {zh[key]}")
    assert not bad, f"{len(bad)} Chinese strings hold English words:\n" + "\n".join(bad[:60])


def _run(capsys, *argv: str) -> str:  # only with zh_workspace, which restores the language
    capsys.readouterr()
    main(["--lang", "zh", *argv])
    out = capsys.readouterr()
    return out.out + out.err


def _text_of_json(text: str) -> str:
    try:
        return " ".join(str(v) for v in json.loads(text).values())
    except ValueError:
        return text


@pytest.fixture
def zh_workspace(workspace, monkeypatch):
    monkeypatch.setenv("DEVTUNE_LANG", "en")  # `main(["--lang", "zh", ...])` sets it; put back afterwards
    place_recorded_run(workspace, "20260101-000000-bad", "lf_unknown_template", RunStatus.FAILED, 1, started=1.0)
    place_recorded_run(workspace, "20260102-000000-nan", "lf_nan_loss", RunStatus.STOPPED, 0, started=2.0)
    fake_model(workspace)
    register_dataset(workspace)
    assert main(["config", "init", "--preset", "cpu-demo", "--model", "models/tiny-llama3",
                 "-w", str(workspace.root)]) == 0
    for name in ("support_messy.jsonl", "qa_pairs.json", "faq_gbk.txt", "cs_chatlog_zh.txt"):
        (workspace.data_dir / name).write_bytes((DATA / name).read_bytes())
    done = workspace.root / "saves" / "cpu-demo" / "checkpoint-90"  # a finished run in the config's output_dir
    done.mkdir(parents=True)
    (done / "trainer_state.json").write_text(json.dumps({"global_step": 90, "max_steps": 90, "num_train_epochs": 80}))
    yield workspace
    from core.i18n import set_language

    set_language("en")


COMMANDS = [
    ("runs",),
    ("monitor", "20260102-000000-nan"),
    ("monitor", "20260101-000000-bad"),
    ("diagnose",),
    ("check-export", "exports/nope"),
    ("config", "check", "--no-llamafactory"),
    ("train", "--detach"),
    ("doctor", "--replay", str(ROOT / "tests" / "fixtures" / "doctor" / "machines" / "mi300x8-cuda-wheel")),
    # the Data step's commands ({data} is the workspace's data folder): issue 21 #12 found lint's severities,
    # "(estimate)" and "zh 74% en 23% mixed 3%" in English
    ("data", "lint", "{data}/support_messy.jsonl"),
    ("data", "lint", "{data}/qa_pairs.json"),
    ("data", "lint", "{data}/faq_gbk.txt"),
    ("data", "lint", "{data}/dataset_info.json"),
    ("data", "lint", "{data}/missing.jsonl"),
    ("data", "stats", "{data}/support_messy.jsonl"),
    ("data", "fix", "{data}/support_messy.jsonl", "-o", "{data}/fixed.jsonl"),
    ("data", "fix", "{data}/qa_pairs.json", "-o", "{data}/qa.jsonl"),
    ("data", "convert", "{data}/cs_chatlog_zh.txt", "-o", "{data}/chat.jsonl"),
    ("data", "register", "{data}/support_clean.jsonl", "--name", "support"),
    ("data", "register", "{data}/support_messy.jsonl", "--name", "messy"),
]


def _command_id(argv) -> str:
    return " ".join(Path(a).name if a.startswith("{data}") else a for a in argv[:3])


@pytest.mark.parametrize("argv", COMMANDS, ids=_command_id)
def test_command_output_under_lang_zh_is_chinese(zh_workspace, capsys, argv):
    from core.data.findings import RULES

    argv = [a.replace("{data}", str(zh_workspace.data_dir)) for a in argv]
    out = _run(capsys, *argv, "-w", str(zh_workspace.root))
    ids = {"20260101-000000-bad", "20260102-000000-nan"}
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines

    def left(line: str) -> list[str]:  # a lint rule's id (`duplicate`, `whitespace`) is an identifier
        return [w for w in english_left(line) if w not in RULES]

    # quoted evidence is the tools' own words: the trainer's log lines ("证据"), the doctor's evidence and
    # fix commands (indented under their check); the rest must be Chinese
    bad = [(line, left(line)) for line in lines
           if left(line) and not any(i in line for i in ids) and "证据" not in line
           and not line.startswith(" " * 9)]
    assert not bad, "\n".join(f"{left}: {line}" for line, left in bad)


def test_counts_are_singular_for_one_in_english_and_both_forms_are_catalog_keys():
    from core.i18n import _n, set_language

    set_language("en")
    assert _n("{n} error", "{n} errors", 1) == "1 error" and _n("{n} error", "{n} errors", 2) == "2 errors"
    keys = extract_keys(ROOT)
    assert "{n} error" in keys and "{n} errors" in keys  # catalog_keys reads both literals of _n
    assert load("zh")["{n} error"] == load("zh")["{n} errors"]


def test_one_of_a_thing_is_not_plural_in_the_outputs(zh_workspace, capsys):
    from core.i18n import set_language

    set_language("en")
    capsys.readouterr()
    main(["--lang", "en", "config", "check", "--no-llamafactory", "-w", str(zh_workspace.root)])
    main(["--lang", "en", "diagnose", str(zh_workspace.runs_dir / "20260102-000000-nan" / "stdout.log"),
          "-w", str(zh_workspace.root)])
    out = capsys.readouterr().out
    assert "1 error\n" in out and "× 1 process;" in out and "in 1 file." in out
    assert not re.search(r"\b1 (errors|warnings|processes|rows|files|steps)\b", out), out


def test_chinese_names_a_line_one_way():
    """Issue 29, item 13: `L12:` stood beside `第 23 行：` in one list of findings; Chinese says 第 N 行 throughout."""
    zh = load("zh")
    english_style = sorted(k for k, v in zh.items() if re.search(r"(?<![A-Za-z])L\{\w+\}", v))
    assert not english_style, english_style[:10]


def test_an_eval_report_in_chinese_is_chinese_and_its_table_lines_up(workspace, monkeypatch):
    """Issue 29, item 13: report.md's header lines and `exact` were English, and the CLI's table misaligned
    under Chinese set labels (padded by characters, not by display cells)."""
    from core.i18n import display_width
    from tests.eval_fixture import write_recorded_eval

    monkeypatch.setenv("DEVTUNE_LANG", "zh")
    report = write_recorded_eval(workspace)
    md = (workspace.root / report.folder / "report.md").read_text(encoding="utf-8")
    head = [line for line in md.splitlines()[:12] if line.startswith(("- ", "| 集合"))]
    assert head and not [(line, english_left(line)) for line in head if english_left(line)], head
    lines = report.lines()
    table = lines[lines.index("") + 1:]
    table = table[:table.index("")]
    assert len(table) > 2 and len({display_width(line) for line in table}) == 1, table


def test_a_json_error_in_chinese_frames_jsons_own_words(monkeypatch):
    """Issue 29, item 13: `无效的 JSON：Expecting value` gave Python's English bare; the frame says where (line and
    column) in Chinese and quotes json's own message."""
    from core.data.json_repair import diagnose

    monkeypatch.setenv("DEVTUNE_LANG", "zh")
    d = diagnose(b'{"instruction": "hi", "output": }', 7)
    assert d.reason.startswith("第 7 行第 ") and "“Expecting value”" in d.reason, d.reason
    assert not english_left(d.reason) and not [f for f in d.findings if english_left(f.message)], \
        (d.reason, [f.message for f in d.findings])
