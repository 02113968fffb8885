"""A DPO run set up and started in the wizard, as a person does it after a first SFT: in the Config step
the stage `dpo`, the preference dataset and the SFT run's adapter, saved with Ctrl+S; the Train step
starts it (F5); the run finishes and the Train step charts its rewards over the steps. The DPO adapter then
merges like any other run, and the merged model's check says ok (merge works the same after any stage).

The SFT run before it is made through the CLI (`config init`, `train`): the wizard's part is the DPO pass."""

import json
import shutil

from core.train.runs import RunStatus, list_runs
from screens.config import ConfigScreen
from screens.train import TrainScreen
from tests.core.config_workspace import register_dataset
from tests.core.dataset_kinds import KINDS, write_kind
from tests.tui.helpers import wait_until
from tui.app import DevtuneApp
from tui.widgets.field_form import FieldForm
from tui.widgets.files_preview import FilesPreview


def _yaml(screen) -> str:
    return screen.query_one(FilesPreview).text_of("preview-yaml")


async def _set(pilot, screen, key: str, value) -> None:
    form = screen.query_one(FieldForm)
    form.query_one("#field-" + key.replace(".", "-").replace("_", "-")).value = value
    await pilot.pause()


async def test_a_dpo_run_from_the_config_step_finishes_shows_its_rewards_and_merges(
        workspace, tiny_model, devtune_cli, lf_env, monkeypatch):
    for key, value in lf_env.items():  # the runs the wizard starts inherit the test's CPU environment
        monkeypatch.setenv(key, value)
    shutil.copytree(tiny_model, workspace.models_dir / "tiny-llama3")
    pairs = KINDS["dpo_alpaca"][1]()
    register_dataset(workspace, "support", [{"instruction": r["instruction"], "input": "", "output": r["chosen"]}
                                            for r in pairs])
    cli = lambda *args, timeout=900: devtune_cli("-w", str(workspace.root), *args, env=lf_env, timeout=timeout)  # noqa: E731
    out = cli("config", "init", "--preset", "cpu-demo", "--dataset", "support", "--force")
    assert out.returncode == 0, out.stderr
    out = cli("train")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    path = write_kind(workspace.data_dir, "dpo_sharegpt", registered=False)
    out = cli("data", "register", str(path.relative_to(workspace.root)), "--name", "prefs")
    assert out.returncode == 0, out.stdout + out.stderr

    workspace.update_state(lambda s: setattr(s, "current_step", "config"))
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ConfigScreen) and app.screen.is_mounted)
        config = app.screen
        await wait_until(pilot, lambda: "lora_rank:" in _yaml(config))
        await _set(pilot, config, "stage", "dpo")
        await _set(pilot, config, "dataset", "prefs")
        await _set(pilot, config, "adapter_name_or_path", "saves/cpu-demo")
        await wait_until(pilot, lambda: "stage: dpo" in _yaml(config) and "dataset: prefs" in _yaml(config)
                         and "adapter_name_or_path: saves/cpu-demo" in _yaml(config))
        yaml_file = workspace.configs_dir / "train.yaml"
        await pilot.press("ctrl+s")
        if not await _saved(pilot, yaml_file):  # the file `config init` wrote: a second Ctrl+S replaces it
            await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "stage: dpo" in yaml_file.read_text())

        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: isinstance(app.screen, TrainScreen) and app.screen.is_mounted)
        train = app.screen
        before = {r.id for r in list_runs(workspace)}
        await pilot.press("f5")
        await wait_until(pilot, lambda: {r.id for r in list_runs(workspace)} - before, timeout=60)
        run = next(r for r in list_runs(workspace) if r.id not in before)
        await wait_until(pilot, lambda: not next(r for r in list_runs(workspace) if r.id == run.id).active,
                         timeout=900)
        ended = next(r for r in list_runs(workspace) if r.id == run.id)
        assert ended.status is RunStatus.FINISHED, (ended.status, ended.note)
        chart = train.query_one("StageChart")
        await wait_until(pilot, lambda: chart.has_class("-visible") and "rewards/margins" in chart.series,
                         timeout=60)
        for name in ("rewards/chosen", "rewards/rejected", "rewards/accuracies"):
            xs, _ys = chart.series[name]
            assert len(xs) >= 2, (name, xs)

    adapter = workspace.root / ended.output_dir
    assert json.loads((adapter / "adapter_config.json").read_text())["r"] == 16
    out = cli("merge", ended.id, "--json")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    merged = json.loads(out.stdout)
    assert merged["status"] == "finished" and merged["verdict"] == "ok", merged


async def _saved(pilot, yaml_file) -> bool:
    try:
        await wait_until(pilot, lambda: "stage: dpo" in yaml_file.read_text(), timeout=5)
        return True
    except AssertionError:
        return False
