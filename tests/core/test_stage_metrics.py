"""DPO / KTO numbers the Train step shows: read from the loss dicts TRL's trainers print on stdout
(recorded from a real DPO run of the tiny model), matched to the step of the trainer_log.jsonl line."""

import json

from core.train.metrics import MetricsPoller, stage_metrics_text

STDOUT = ("{'loss': '0.5177', 'grad_norm': '0.7267', 'learning_rate': '0.005', 'rewards/chosen': '0.4195', "
          "'rewards/rejected': '-0.04745', 'rewards/accuracies': '0.6', 'rewards/margins': '0.467', "
          "'logps/chosen': '-177.7', 'logps/rejected': '-63.06', 'logits/chosen': '-0.06622', "
          "'logits/rejected': '-0.07185', 'epoch': '2.5'}\n")
LOG = {"current_steps": 5, "total_steps": 160, "loss": 0.5176811695098877, "accuracy": 0.6000000238418579,
       "lr": 0.005, "epoch": 2.5, "percentage": 3.12, "elapsed_time": "0:00:00", "remaining_time": "0:00:15"}


def test_dpo_rewards_margin_and_accuracy_are_read(tmp_path):
    (tmp_path / "trainer_log.jsonl").write_text(json.dumps(LOG) + "\n")
    (tmp_path / "stdout.log").write_text(STDOUT)
    (tmp_path / "stderr.log").write_text("")
    poller = MetricsPoller(tmp_path / "trainer_log.jsonl", tmp_path / "stdout.log", tmp_path / "stderr.log")
    poller.poll()
    snap = poller.metrics.snapshot()
    values = dict(snap.stage_metrics)
    assert values == {"rewards/chosen": 0.4195, "rewards/rejected": -0.04745, "rewards/margins": 0.467,
                      "rewards/accuracies": 0.6}
    assert poller.metrics.stage["rewards/margins"].xs == [5]
    assert stage_metrics_text(snap.stage_metrics) == \
        "rewards chosen 0.419 · rejected -0.0474 · margin 0.467 · accuracy 60%"


def test_an_sft_run_shows_no_stage_metrics(tmp_path):
    (tmp_path / "trainer_log.jsonl").write_text(json.dumps({**LOG, "accuracy": None}) + "\n")
    (tmp_path / "stdout.log").write_text("{'loss': 1.2, 'grad_norm': 0.5, 'learning_rate': 0.01, 'epoch': 2.5}\n")
    (tmp_path / "stderr.log").write_text("")
    poller = MetricsPoller(tmp_path / "trainer_log.jsonl", tmp_path / "stdout.log", tmp_path / "stderr.log")
    poller.poll()
    assert poller.metrics.snapshot().stage_metrics == () and stage_metrics_text(()) == ""
