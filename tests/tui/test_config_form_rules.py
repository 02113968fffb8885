# ruff: noqa: F811 - the fixtures come from test_config_screen
"""The Config form and `devtune config init` apply the same field rules (core.config.field_rules): the form
shows what a rule changed, and the YAML it previews is the one the CLI writes for the same choices. And what
the person types is never lost to a background result landing meanwhile (issue 29, items 15 and 16)."""

from textual.widgets import Input

from core.config.templates import BUILTIN
from tests.core.config_workspace import register_dataset
from tests.tui.helpers import wait_until
from tests.tui.test_config_screen import config_only, demo_ws, preview_text, set_field, started  # noqa: F401
from tui.app import DevtuneApp
from tui.widgets.field_form import FieldForm

ROWS = [{"instruction": f"question {i}", "input": "", "output": f"answer {i}"} for i in range(40)]


def _yaml_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


async def test_the_form_writes_what_config_init_writes_for_the_same_changes(demo_ws, config_only, devtune_cli):
    register_dataset(demo_ws, "support", rows=ROWS)
    register_dataset(demo_ws, "support_eval", rows=ROWS[:4])
    app = DevtuneApp(demo_ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await started(pilot, app)
        form = screen.query_one(FieldForm)
        await wait_until(pilot, lambda: "eval_dataset: support_eval" in preview_text(screen, "yaml"))
        one_gpu = form.values()["eval_steps"]
        await set_field(pilot, screen, "launch.gpus_per_node", "2")
        await set_field(pilot, screen, "zero_stage", "3")
        await wait_until(pilot, lambda: form.values()["eval_steps"] != one_gpu)  # the interval follows the run
        await set_field(pilot, screen, "stage", "dpo")
        await wait_until(pilot, lambda: form.values()["output_dir"] == "saves/cpu-demo-dpo")
        await wait_until(pilot, lambda: "output_dir: saves/cpu-demo-dpo" in preview_text(screen, "yaml")
                         and "stage: dpo" in preview_text(screen, "yaml"))
        form_yaml = preview_text(screen, "yaml")
    done = devtune_cli("config", "init", "-w", str(demo_ws.root), "--preset", "cpu-demo", "--dataset", "support",
                       "--gpus", "2", "--zero", "3", "--stage", "dpo", "--output", "configs/train.yaml", "--force")
    assert (demo_ws.root / "configs/train.yaml").exists(), done.stdout + done.stderr
    cli_yaml = (demo_ws.root / "configs/train.yaml").read_text()
    assert _yaml_lines(form_yaml) == _yaml_lines(cli_yaml)


async def test_the_form_shows_what_a_rule_cleared(demo_ws, config_only):
    app = DevtuneApp(demo_ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await started(pilot, app)
        form = screen.query_one(FieldForm)
        await set_field(pilot, screen, "finetuning_type", "qlora")
        await set_field(pilot, screen, "quantization_bit", "4")
        await wait_until(pilot, lambda: "quantization_bit: 4" in preview_text(screen, "yaml"))
        await set_field(pilot, screen, "finetuning_type", "lora")
        await wait_until(pilot, lambda: "quantization_bit" not in preview_text(screen, "yaml"))
        assert form.values()["quantization_bit"] == ""  # not a "4" the YAML no longer has


async def test_digits_typed_while_a_background_result_lands_all_arrive(demo_ws, config_only):
    """Under load a background result (here the template list) lands between a key and the Changed message it
    posted; that message must still reach the spec (it was once dropped: `1000` typed, `100` trained)."""
    app = DevtuneApp(demo_ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await started(pilot, app)
        form = screen.query_one(FieldForm)
        form.focus_field("cutoff_len")
        field = form.query_one("#field-cutoff-len", Input)
        field.value = ""
        await pilot.pause()
        for key in "1000":
            field.insert_text_at_cursor(key)  # what Input does with a typed digit: Changed is now queued
            screen._templates_loaded(BUILTIN)  # ... and the background result is handled before it
            await pilot.pause()
        await pilot.press("tab")
        await wait_until(pilot, lambda: "cutoff_len: 1000" in preview_text(screen, "yaml"))
        assert screen.spec.cutoff_len == 1000
        assert form.values()["cutoff_len"] == "1000"


async def test_what_the_person_typed_before_the_config_loaded_is_kept(demo_ws, config_only):
    """A slow first read of the config (a busy machine) must not overwrite a field typed meanwhile."""
    app = DevtuneApp(demo_ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await started(pilot, app)
        form = screen.query_one(FieldForm)
        field = form.query_one("#field-cutoff-len", Input)
        loaded = screen._read_config(None, screen.ws, screen.state.dataset_name)
        form.focus_field("cutoff_len")
        field.value = ""
        await pilot.press(*"777")
        screen._loaded(loaded)  # the config read in the background lands after the typing
        await pilot.press("tab")
        await wait_until(pilot, lambda: "cutoff_len: 777" in preview_text(screen, "yaml"))
        assert field.value == "777"
