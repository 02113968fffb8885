"""The trainer's stdout loss dicts and stderr tqdm bars, from real runs."""

import math
from pathlib import Path

from core.train.output import StderrTail, StdoutTail, parse_loss_dict, parse_tqdm

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def test_loss_dicts_with_string_values_transformers_5():
    d = parse_loss_dict("{'loss': '8.02', 'grad_norm': '0.5526', 'learning_rate': '0', 'epoch': '0.04'}")
    assert d.kind == "train" and d.values == {"loss": 8.02, "grad_norm": 0.5526, "learning_rate": 0.0, "epoch": 0.04}
    nan = parse_loss_dict("{'loss': 'nan', 'grad_norm': 'nan', 'learning_rate': '1e+04', 'epoch': '0.125'}")
    assert math.isnan(nan.values["loss"]) and nan.values["learning_rate"] == 1e4
    assert parse_loss_dict("{'eval_loss': '7.51', 'eval_runtime': '0.0208', 'epoch': '0.4167'}").kind == "eval"
    assert parse_loss_dict("{'train_runtime': '0.7381', 'train_loss': '7.513', 'epoch': '1.667'}").kind == "summary"
    assert parse_loss_dict("{'task': {'name': 'Causal Language Modeling'}}").kind == "other"
    assert parse_loss_dict("input_ids:") is None and parse_loss_dict("{'broken': ") is None


def test_webui_log_format_with_numbers():
    line = "[INFO|2026-11-30 06:48:52] logging.py:144 >> {'loss': 7.6270, 'learning_rate': 1.0000e-03, 'epoch': 0.06}"
    d = parse_loss_dict(line)
    assert d.kind == "train" and d.values["learning_rate"] == 1e-3


def test_stdout_tail_on_a_real_run():
    dicts = StdoutTail(LOGS / "lf_normal" / "stdout.log").poll()
    kinds = [d.kind for d in dicts]
    assert kinds.count("train") == 20 and kinds.count("eval") == 4 and kinds[-1] == "summary"
    running = StdoutTail(LOGS / "lf_resume" / "running_log.txt").poll()
    assert running and running[0].values["loss"] == 7.627


def test_tqdm_forms():
    bars = parse_tqdm("\r  5%|▌         | 1/20 [00:01<00:19,  1.02s/it]\r 10%|█         | 2/20 [00:02<00:18,  "
                      "1.01it/s]\r  0%|          | 0/20 [00:00<?, ?it/s]")
    assert [(b.n, b.total) for b in bars] == [(1, 20), (2, 20), (0, 20)]
    assert abs(bars[0].rate - 1 / 1.02) < 1e-9 and bars[0].remaining_s == 19.0 and bars[1].rate == 1.01
    assert bars[2].rate is None and bars[2].remaining_s is None
    assert parse_tqdm("\r  1%|          | 10/1752 [1:00:29<1:22:01,  2.83s/it]")[0].elapsed_s == 3629.0
    nested = parse_tqdm("\n\r  0%|          | 0/4 [00:00<?, ?it/s]\x1b[A"
                        "\r 25%|██▌       | 5/20 [00:00<00:00, 44.80it/s]")
    assert [b.nested for b in nested] == [True, False]
    described = parse_tqdm("Running tokenizer on dataset: 100%|██████████| 2/2 [00:00<00:00, "
                           "100.00 examples/s]")
    assert described[0].desc == "Running tokenizer on dataset:"


def test_stderr_tail_real_run_keeps_the_training_bar_only():
    tail = StderrTail(LOGS / "lf_normal" / "stderr.log")
    bars = tail.poll()
    assert tail.total_steps == 20
    assert bars and all(not b.nested and not b.desc for b in bars)
    train = [b for b in bars if b.total == 20]
    assert train[-1].n == 20


def test_stderr_tail_sees_the_resume_banner_and_waits_for_unfinished_fragments(tmp_path):
    tail = StderrTail(LOGS / "lf_resume" / "part2.stderr.head.log")
    tail.poll()
    assert tail.resumed_from == 10 and tail.total_steps == 400
    path = tmp_path / "stderr.log"
    live = StderrTail(path)
    path.write_text("\r  5%|▌         | 1/20 [00:01<00:19,  1.02s/i")
    assert live.poll() == []  # half a bar
    with open(path, "a") as fh:
        fh.write("t]")
    (bar,) = live.poll()  # complete but unterminated: reported as the current state
    assert bar.n == 1
