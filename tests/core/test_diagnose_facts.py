"""A diagnosis says only what is true of the run: steps from the trainer's progress, advice that works on the
run's machine (issue 29, item 8). The run is real: QLoRA on this CPU machine (tests/fixtures/logs/lf_qlora_cpu)."""

import shutil
import time

from core.train.failures import diagnose_record
from core.train.root_cause import last_progress
from core.train.runs import RunStatus, run_dir, write_record
from tests.recorded_runs import LOGS, place_recorded_run

RUN = "20261202-004951-cpu-demo"


def _qlora_cpu_run(ws, *, cpu: bool = True):
    record = place_recorded_run(ws, RUN, "lf_qlora_cpu", RunStatus.FAILED, 1, time.time())
    if cpu:  # as devtune launched it: a CPU launch, and its GPU recorder found no GPU
        record.env = {"DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"}
        shutil.copy(LOGS / "lf_qlora_cpu" / "gpu.status", run_dir(ws, RUN) / "gpu.status")
    record.source_config = "configs/qlora.yaml"
    write_record(run_dir(ws, RUN), record)
    return record


def _evidence(found) -> list[str]:
    return [e.text for d in found for e in d.evidence]


def test_the_tokenizers_bar_is_no_training_step(workspace):
    found = diagnose_record(workspace, _qlora_cpu_run(workspace))
    assert found[0].id == "bitsandbytes-missing"
    assert not [t for t in _evidence(found) if "step" in t], _evidence(found)  # was "last step reached: 29 of 29"


def test_labelled_bars_are_not_steps_the_trainers_bar_is():
    tokenizer = "Running tokenizer on dataset: 100%|██████████| 29/29 [00:00<00:00, 2115.33 examples/s]"
    assert last_progress([(1, tokenizer)]) is None
    trainer = tokenizer + "\r  1%|          | 5/480 [00:00<00:10, 46.58it/s]"
    assert last_progress([(1, tokenizer), (2, trainer)]) == (5, 480)


def test_no_bitsandbytes_upgrade_where_qlora_cannot_run(workspace):
    first = diagnose_record(workspace, _qlora_cpu_run(workspace))[0]
    assert not [c for c in first.commands if "pip install" in c]
    assert "pip install" not in first.fix and "needs a GPU" in first.fix
    assert first.commands == ["devtune config check --config configs/qlora.yaml"]


def test_on_a_gpu_machine_installing_bitsandbytes_is_the_fix(workspace):
    first = diagnose_record(workspace, _qlora_cpu_run(workspace, cpu=False))[0]
    assert first.id == "bitsandbytes-missing"
    assert any("pip install" in c and "bitsandbytes" in c for c in first.commands)


def test_devtune_diagnose_says_the_same(workspace, devtune_cli):
    _qlora_cpu_run(workspace)
    out = devtune_cli("-w", str(workspace.root), "diagnose", RUN).stdout
    assert "bitsandbytes is not installed" in out
    assert "last step reached" not in out and "pip install" not in out
