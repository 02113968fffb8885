"""The tiny model trained with pt, dpo and kto through `devtune train` on CPU, each from a dataset the
test writes, registered by `devtune data register` and set up by `devtune config init --stage`; DPO also
from the adapter of an SFT run (the usual order: SFT, then DPO on chosen/rejected answers). The run
finishes, its trainer_log.jsonl reaches the last step, and the DPO/KTO metrics are read back."""

import json
import shutil

import pytest

from core.train.metrics import MetricsPoller
from tests.core.dataset_kinds import KINDS, write_kind


def _setup(workspace, tiny_model, devtune_cli, lf_env, name: str, stage: str, *extra: str):
    if not (workspace.models_dir / "tiny-llama3").exists():
        shutil.copytree(tiny_model, workspace.models_dir / "tiny-llama3")
    if name == "c4":  # packing joins the rows into cutoff_len (256) blocks: give it a few blocks of text
        texts = [r["text"] for r in KINDS["c4"][1]()]
        rows = [{"text": " ".join(texts[k:] + texts[:k])} for k in range(len(texts))] * 4
        path = workspace.data_dir / "c4_demo.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        path = write_kind(workspace.data_dir, name, registered=False)
    env = dict(lf_env)
    out = devtune_cli("-w", str(workspace.root), "data", "register", str(path.relative_to(workspace.root)),
                      "--name", name, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    out = devtune_cli("-w", str(workspace.root), "config", "init", "--preset", "cpu-demo", "--stage", stage,
                      "--dataset", name, "--force", *extra, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[error]" not in out.stdout, out.stdout
    return env


def _train(workspace, devtune_cli, env, output: str) -> list[dict]:
    out = devtune_cli("-w", str(workspace.root), "train", env=env, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    log = [json.loads(line) for line in (workspace.root / output / "trainer_log.jsonl").read_text().splitlines()]
    assert log[-1]["current_steps"] == log[-1]["total_steps"] > 0
    return log


@pytest.mark.parametrize("name,stage", [("c4", "pt"), ("kto", "kto")])
def test_stage_trains_to_the_end(name, stage, workspace, tiny_model, devtune_cli, lf_env):
    env = _setup(workspace, tiny_model, devtune_cli, lf_env, name, stage)
    log = _train(workspace, devtune_cli, env, f"saves/cpu-demo-{stage}")
    assert any("loss" in r for r in log)
    if stage == "kto":
        run = sorted((workspace.root / ".devtune" / "runs").iterdir())[-1]
        poller = MetricsPoller(workspace.root / "saves/cpu-demo-kto/trainer_log.jsonl", run / "stdout.log",
                               run / "stderr.log")
        poller.poll()
        assert "rewards/chosen" in dict(poller.metrics.snapshot().stage_metrics)


def test_dpo_from_an_sft_adapter_shows_its_rewards(workspace, tiny_model, devtune_cli, lf_env):
    from tests.core.config_workspace import register_dataset

    shutil.copytree(tiny_model, workspace.models_dir / "tiny-llama3")
    pairs = KINDS["dpo_alpaca"][1]()
    register_dataset(workspace, "support", [{"instruction": r["instruction"], "input": "", "output": r["chosen"]}
                                            for r in pairs])
    out = devtune_cli("-w", str(workspace.root), "config", "init", "--preset", "cpu-demo", "--dataset", "support",
                      "--force", env=lf_env)
    assert out.returncode == 0, out.stderr
    _train(workspace, devtune_cli, lf_env, "saves/cpu-demo")
    env = _setup(workspace, tiny_model, devtune_cli, lf_env, "dpo_sharegpt", "dpo", "--adapter", "saves/cpu-demo")
    log = _train(workspace, devtune_cli, env, "saves/cpu-demo-dpo")
    assert any("accuracy" in r for r in log)
    run = sorted((workspace.root / ".devtune" / "runs").iterdir())[-1]
    poller = MetricsPoller(workspace.root / "saves/cpu-demo-dpo/trainer_log.jsonl", run / "stdout.log",
                           run / "stderr.log")
    poller.poll()
    shown = dict(poller.metrics.snapshot().stage_metrics)
    assert {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies"} <= set(shown), shown
    adapter = json.loads((workspace.root / "saves/cpu-demo-dpo/adapter_config.json").read_text())
    assert adapter["r"] == 16
