"""The Config step wires the held-out set (`N_eval`) into the training YAML for the eval loss, with
LLaMA-Factory's own argument names (checked by its parser), and checks the eval settings."""

import json

from core.config.eval_loss import (
    eval_steps_for,
    follow_datasets,
    heldout_sets,
    rule_eval,
    wire_eval_loss,
    with_eval_loss,
)
from core.config.files import render_yaml, rule_context, sidecar_path
from core.config.form import form_values, spec_from_form
from core.config.lf_argcheck import check_with_llamafactory
from core.config.presets import preset_spec
from core.config.yaml_in import import_lf_args
from core.config.yaml_out import lf_args
from tests.core.config_workspace import fake_model, register_dataset

INFO = {"support": {"file_name": "support.train.jsonl"}, "support_eval": {"file_name": "support.heldout.jsonl"},
        "faq": {"file_name": "faq.jsonl"}}


def held_out_workspace(ws):
    fake_model(ws)
    register_dataset(ws, "support", rows=[{"instruction": f"q{i}", "input": "", "output": f"a{i}"} for i in range(23)])
    register_dataset(ws, "support_eval", rows=[{"instruction": f"h{i}", "input": "", "output": f"b{i}"}
                                                for i in range(6)])
    return ws


def test_the_held_out_set_is_wired_with_llamafactorys_names(workspace, uses_llamafactory):
    spec = wire_eval_loss(held_out_workspace(workspace), preset_spec("cpu-demo", ["support"]))
    assert spec.eval_dataset == ["support_eval"] and spec.eval_strategy == "steps"
    # 23 rows / batch 4 = 6 steps an epoch × 80 epochs = 480 steps: about 10 evaluations, on logging steps (5)
    assert spec.eval_steps == 50 and spec.per_device_eval_batch_size == 4
    args = lf_args(spec)
    assert {k: args[k] for k in ("eval_dataset", "eval_strategy", "eval_steps", "per_device_eval_batch_size")} == {
        "eval_dataset": "support_eval", "eval_strategy": "steps", "eval_steps": 50, "per_device_eval_batch_size": 4}
    text = render_yaml(spec)
    assert "### eval\neval_dataset: support_eval\nper_device_eval_batch_size: 4\neval_strategy: steps\n" in text
    back = import_lf_args(args).spec
    assert back.eval_dataset == ["support_eval"] and not back.extra  # modelled, not an unknown key
    checked = check_with_llamafactory(args, cwd=workspace.root)
    assert checked.ran and checked.ok, checked.error
    codes = {f.code: f for f in rule_eval(spec, rule_context(workspace, spec))}
    assert codes["eval.on"].severity == "info" and "every 50 steps" in codes["eval.on"].message


def test_a_config_that_says_how_to_evaluate_is_left_alone():
    base = preset_spec("cpu-demo", ["support"])
    assert with_eval_loss(base, {"support": {}}, 23) == base  # no held-out set
    for update in ({"val_size": 0.1}, {"eval_strategy": "no"}, {"eval_dataset": ["faq"]}):
        spec = base.model_copy(update=update)
        assert with_eval_loss(spec, INFO, 23) == spec
    assert heldout_sets(preset_spec("cpu-demo", ["support", "faq"]), INFO) == ["support_eval"]


def test_eval_steps_follow_the_length_of_the_run():
    spec = preset_spec("lora-1gpu", ["support"])  # batch 2 × 8, 3 epochs, logging every 10
    assert eval_steps_for(spec, 10_000) == 190  # 625 × 3 = 1875 steps
    assert eval_steps_for(spec, 50) == 10  # never below the logging steps
    assert eval_steps_for(spec, None) == 500  # rows unknown: the save steps
    assert eval_steps_for(spec.model_copy(update={"max_steps": 3000}), None) == 300


def test_the_eval_set_follows_the_datasets_and_clearing_it_turns_it_off():
    old = with_eval_loss(preset_spec("cpu-demo", ["support"]), INFO, 23)
    moved = follow_datasets(old, old.model_copy(update={"dataset": ["faq"]}), INFO, 10)
    assert moved.eval_dataset == [] and moved.eval_strategy is None and moved.eval_steps is None
    info = {**INFO, "faq_eval": {"file_name": "faq.heldout.jsonl"}}
    assert follow_datasets(old, old.model_copy(update={"dataset": ["faq"]}), info, 10).eval_dataset == ["faq_eval"]
    off, errors = spec_from_form(old, {**form_values(old), "eval_dataset": ""})
    assert not errors and off.eval_strategy == "no" and off.eval_steps is None
    assert with_eval_loss(off, INFO, 23) == off  # turned off by the person: not wired again
    on, _errors = spec_from_form(off, {**form_values(off), "eval_dataset": "support_eval"})
    assert on.eval_dataset == ["support_eval"] and on.eval_strategy == "steps"


def test_the_eval_checks(workspace):
    held_out_workspace(workspace)
    plain = preset_spec("cpu-demo", ["support"])
    codes = {f.code: f.severity for f in rule_eval(plain, rule_context(workspace, plain))}
    assert codes == {"eval.off": "info"}  # a held-out set nobody evaluates
    bad = plain.model_copy(update={"eval_dataset": ["nope", "support"], "val_size": 0.1, "eval_strategy": "steps"})
    codes = {f.code: f.severity for f in rule_eval(bad, rule_context(workspace, bad))}
    assert codes == {"eval.both": "error", "eval.unregistered": "error", "eval.trained_on": "warning",
                     "eval.on": "info"}
    lost = plain.model_copy(update={"eval_strategy": "steps"})
    assert {f.code for f in rule_eval(lost, rule_context(workspace, lost))} >= {"eval.no_set"}


def test_config_init_wires_it_and_says_so(workspace, devtune_cli):
    held_out_workspace(workspace)
    out = devtune_cli("-w", str(workspace.root), "config", "init", "--preset", "cpu-demo", "--dataset", "support")
    assert out.returncode == 0, out.stderr
    assert "eval loss on support_eval every 50 steps" in out.stdout
    text = (workspace.configs_dir / "train.yaml").read_text()
    assert "eval_dataset: support_eval" in text and "eval_steps: 50" in text
    side = json.loads(sidecar_path(workspace, "configs/train.yaml").read_text())
    assert side["spec"]["eval_dataset"] == ["support_eval"]
