"""core.train.root_cause: the first exception of the first failing rank, read from real log shapes, and the
diagnosis it gives when no rule knows the error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.train.failures import diagnose_files, diagnose_text
from core.train.root_cause import find_root_cause, last_progress, read_exceptions, signal_name

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def numbered(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.split("\n"), 1))


RANKED = """\
[rank1]: Traceback (most recent call last):
[rank0]: Traceback (most recent call last):
[rank1]:   File "/v/site-packages/transformers/trainer.py", line 2300, in _inner_training_loop
[rank0]:   File "/v/site-packages/transformers/trainer.py", line 2300, in _inner_training_loop
[rank1]:     self._load_from_checkpoint(resume_from_checkpoint)
[rank1]: ValueError: Can't find a valid checkpoint at saves/x/checkpoint-640
[rank0]: ValueError: Can't find a valid checkpoint at saves/x/checkpoint-640
E1201 10:00:00.000000 1 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 0
Traceback (most recent call last):
  File "/v/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_10:00:00
  host      : node7
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 4242)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_interleaved_ranks_and_the_torchrun_summary():
    cause = find_root_cause([("stderr.log", numbered(RANKED))], exit_code=1)
    assert cause.exception.text == "ValueError: Can't find a valid checkpoint at saves/x/checkpoint-640"
    assert cause.exception.line == 7 and cause.rank == 0 and cause.host == "node7"  # the rank torchrun names
    assert cause.failed_ranks == [0, 1]
    assert "transformers/trainer.py:2300" in cause.exception.frame


def test_a_chain_counts_from_the_exception_that_caused_the_last_one():
    text = "\n".join([
        "Traceback (most recent call last):", '  File "/v/site-packages/pandas/io/json/_json.py", line 1, in p',
        "ValueError: Trailing data", "", "During handling of the above exception, another exception occurred:", "",
        "Traceback (most recent call last):", '  File "/v/site-packages/datasets/json.py", line 137, in g',
        "pyarrow.lib.ArrowInvalid: JSON parse error: Missing a comma", "",
        "The above exception was the direct cause of the following exception:", "",
        "Traceback (most recent call last):", '  File "/v/site-packages/datasets/builder.py", line 1, in b',
        "datasets.exceptions.DatasetGenerationError: An error occurred while generating the dataset"])
    (exc,) = read_exceptions(numbered(text), "log")
    assert exc.exc_type == "pyarrow.lib.ArrowInvalid"  # not the wrapper, not the failed fallback before it


def test_a_loggers_prefix_on_every_line():
    text = "\n".join([
        "(EngineCore pid=1) ERROR 11-20 12:04:31 [core.py:843] Traceback (most recent call last):",
        "INFO 11-20 12:04:31 [api_server.py:1] something else meanwhile",
        '(EngineCore pid=1) ERROR 11-20 12:04:31 [core.py:843]   File "/v/site-packages/vllm/x.py", line 9, in f',
        "(EngineCore pid=1) ERROR 11-20 12:04:31 [core.py:843] ValueError: no room"])
    (exc,) = read_exceptions(numbered(text), "log")
    assert exc.text == "ValueError: no room" and exc.frame == "/v/site-packages/vllm/x.py:9 in f"


def test_the_raising_frame_is_the_innermost_outside_the_standard_library():
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/v/site-packages/llamafactory/launcher.py", line 115, in launch',
        '  File "/usr/lib/python3.11/subprocess.py", line 571, in run',
        "FileNotFoundError: [Errno 2] No such file or directory: 'torchrun'"])
    (exc,) = read_exceptions(numbered(text), "log")
    assert exc.frame == "/v/site-packages/llamafactory/launcher.py:115 in launch"


@pytest.mark.parametrize("code, name", [(-9, "SIGKILL"), (137, "SIGKILL"), (-15, "SIGTERM"), (1, None), (None, None)])
def test_signal_names(code, name):
    assert signal_name(code) == name


def test_the_last_step_is_the_training_bar_not_a_loading_bar():
    text = "Loading checkpoint shards: 100%|##| 4/4 [00:02<00:00]\r 12/640 [00:10<09:00]\r 13/640 [00:11<09:00]"
    assert last_progress(numbered(text)) == (13, 640)


def test_an_error_no_rule_knows_is_named_with_where_and_who():
    text = "\n".join([
        "[rank3]: Traceback (most recent call last):",
        '[rank3]:   File "/home/me/train_callbacks.py", line 12, in on_step_end',
        "[rank3]:     ratio = seen / skipped",
        "[rank3]: ZeroDivisionError: division by zero",
        " 57%|█████▋    | 57/100 [01:02<00:47,  1.10s/it]"])
    (d,) = diagnose_text(text, "stderr.log", exit_code=1)
    assert d.id == "root-cause" and d.title == "ZeroDivisionError: division by zero"
    texts = [e.text for e in d.evidence]
    assert texts[0] == "ZeroDivisionError: division by zero"
    assert any("train_callbacks.py" in t for t in texts)
    assert any("rank 3" in t for t in texts) and any("57 of 100" in t for t in texts)
    assert any("exited with 1" in t for t in texts)
    assert d.commands == ["sed -n '1,4p' stderr.log"]


def test_a_failure_without_any_exception_still_says_how_it_ended():
    (d,) = diagnose_text("step 5\n", "stderr.log", exit_code=-9)
    assert d.evidence and "SIGKILL" in " ".join(e.text for e in d.evidence)
    (d,) = diagnose_text("nothing useful\n", exit_code=3)
    assert d.id == "unexplained-failure" and "3" in d.title


def test_a_rules_diagnosis_quotes_the_root_exception_first():
    found = diagnose_files([LOGS / "lf_unknown_template" / "stderr.log"], exit_code=1)
    assert found[0].id == "template-unknown"
    assert found[0].evidence[0].text == "ValueError: Template llama-3 does not exist."


def test_a_downstream_timeout_yields_to_the_rank_that_failed_first():
    text = (LOGS / "unseen" / "rank_illegal_memory_then_watchdog.log").read_text()
    found = diagnose_text(text, "stderr.log", exit_code=1)
    assert found[0].id == "gpu-runtime-abort" and "illegal memory access" in found[0].title
    assert "nccl-timeout" in [d.id for d in found]


UNSEEN = json.loads((LOGS / "unseen" / "expected.json").read_text())


def test_failures_never_seen_are_named_right_in_seven_of_eight_and_always_quote_the_exception():
    """Logs written from published shapes after the rules were: the first diagnosis names the cause (the
    rule, or the exception text when no rule knows it), and quotes the root exception's line."""
    right, quoted, report = 0, 0, []
    for name, expected in sorted(UNSEEN.items()):
        path = LOGS / "unseen" / name
        found = diagnose_files([path], exit_code=expected.get("exit_code", 1))
        first = found[0] if found else None
        ok = first is not None and (first.id == expected["cause"] or expected["cause"] in first.title)
        right += ok
        has_quote = first is not None and any(expected["exception"] in e.text for e in first.evidence[:2])
        quoted += has_quote
        report.append(f"{name}: {first.id if first else None} / {first.title if first else ''} ok={ok} "
                      f"quoted={has_quote}")
    assert len(UNSEEN) >= 8
    assert right * 8 >= 7 * len(UNSEEN), "\n".join(report)
    assert quoted == len(UNSEEN), "\n".join(report)


def test_the_raise_source_line_of_a_prefixed_traceback_is_not_evidence():
    """torchrun's `[rank0]:` prefix, then the source line's indentation: `raise ValueError(...)` is code, not
    the error (both ranks' raise lines printed it)."""
    found = diagnose_files([LOGS / "lf_checkpoint_invalid_zero3" / "stderr.log"], exit_code=1)
    assert found[0].id == "checkpoint-invalid"
    assert not [e.text for e in found[0].evidence if "raise ValueError" in e.text]
    assert found[0].evidence[0].text == "ValueError: Can't find a valid checkpoint at saves/demo/checkpoint-4"


def test_a_faulthandler_dump_is_read_as_the_root_cause_with_its_innermost_frame():
    """A real torchrun worker of LLaMA-Factory killed by SIGSEGV with PYTHONFAULTHANDLER=1: the Fatal line (after
    a tqdm bar, on the same line) and the first File line under "Current thread", not another thread's."""
    run = LOGS / "lf_worker_segfault"
    found = diagnose_files([run / "stderr.log", run / "stdout.log"], exit_code=1)
    top = found[0]
    assert top.id == "segfault"
    assert top.evidence[0].text == "Fatal Python error: Segmentation fault"
    assert "torch/autograd/graph.py\", line 979 in _engine_run_backward" in top.evidence[1].text
    texts = " ".join(e.text for e in top.evidence)
    assert "SIGSEGV" in texts and "rank 0" in texts


def test_a_cpp_terminate_is_read_as_the_root_cause():
    """A c10::Error thrown on a C++ thread of a real torchrun worker: the what() line is the cause, the
    "Exception raised from" line the frame; faulthandler's "Fatal Python error: Aborted" after it is the same
    crash (its main thread was elsewhere)."""
    run = LOGS / "lf_worker_cpp_terminate"
    found = diagnose_files([run / "stderr.log", run / "stdout.log"], exit_code=1)
    top = found[0]
    assert top.id == "root-cause"
    assert top.title == "c10::Error: provoked by devtune's fixture script: a C++ thread threw"
    assert top.evidence[0].text.startswith("what():  provoked by") and top.evidence[0].line == 42
    assert top.evidence[1].text.startswith("Exception raised from watchdog_check")
    assert "native code" in top.explanation and "SIGABRT" in " ".join(e.text for e in top.evidence)
    assert top.commands == [f"sed -n '41,43p' {run / 'stderr.log'}"]


def test_prefixed_terminate_and_faulthandler_lines_per_rank():
    text = "\n".join([
        "[rank1]: terminate called after throwing an instance of 'std::runtime_error'",
        "[rank0]: step 12",
        "[rank1]:   what():  CUDA error: no kernel image is available for execution on the device",
        "[rank1]: Fatal Python error: Aborted",
        "[rank1]: ",
        "[rank1]: Current thread 0x00007f00 (most recent call first):",
        '[rank1]:   File "/v/site-packages/flash_attn/flash_attn_interface.py", line 91 in _flash_attn_forward',
        '[rank1]:   File "/v/site-packages/transformers/trainer.py", line 3791 in training_step'])
    cause = find_root_cause([("stderr.log", numbered(text))], exit_code=-6)
    exc = cause.exception
    assert exc.rank == 1 and exc.text == "std::runtime_error: CUDA error: no kernel image is available for execution " \
        "on the device"
    assert exc.line == 3 and exc.frame == "/v/site-packages/flash_attn/flash_attn_interface.py:91 in _flash_attn_forward"


@pytest.mark.parametrize("code, crashed", [(139, True), (-11, True), (135, True), (136, True), (132, True),
                                           (134, True), (137, False), (143, False)])
def test_crash_signals_are_the_process_own_and_kills_come_from_outside(code, crashed):
    found = diagnose_text("step 5\n", "stderr.log", exit_code=code)
    text = " ".join(d.explanation for d in found)
    if crashed:
        assert "ended from outside" not in text
    else:
        assert "from outside" in text or found[0].id in ("oom-killer", "terminated")
    unexplained = [d for d in found if d.id == "unexplained-failure"]
    for d in unexplained:
        assert ("crashed" in d.title) == crashed


def test_a_chain_whose_first_message_spans_lines_is_one_chain():
    """datasets' CastError prints both schemas under its message; the "During handling" marker comes after
    them, so the chain still ends in DatasetGenerationCastError (taken as the error, not the CastError)."""
    text = "\n".join([
        "Traceback (most recent call last):", '  File "/v/site-packages/datasets/table.py", line 2249, in c',
        "datasets.table.CastError: Couldn't cast", "instruction: string", "task_type: string", "to",
        "{'instruction': Value(dtype='string', id=None)}", "because column names don't match", "",
        "During handling of the above exception, another exception occurred:", "",
        "Traceback (most recent call last):", '  File "/v/site-packages/datasets/builder.py", line 2013, in p',
        "datasets.exceptions.DatasetGenerationCastError: An error occurred while generating the dataset", "",
        "All the data files must have the same columns, but at some point there are 3 new columns"])
    (exc,) = read_exceptions(numbered(text), "log")
    assert exc.exc_type == "datasets.exceptions.DatasetGenerationCastError"


def test_a_traceback_after_a_tqdm_bar_on_the_same_line_is_read_with_its_frames():
    text = "\n".join([
        "  0%|          | 0/936 [00:00<?, ?it/s]Traceback (most recent call last):",
        '  File "/v/site-packages/flash_attn/flash_attn_interface.py", line 96, in _flash_attn_forward',
        "    out, softmax_lse, S_dmask, rng_state = flash_attn_gpu.fwd(",
        "RuntimeError: FlashAttention only supports Ampere GPUs or newer."])
    (exc,) = read_exceptions(numbered(text), "log")
    assert exc.text == "RuntimeError: FlashAttention only supports Ampere GPUs or newer."
    assert exc.frame == "/v/site-packages/flash_attn/flash_attn_interface.py:96 in _flash_attn_forward"


def _summary_block(time: str, rank: int, exitcode: str, traceback: str) -> str:
    """torchrun's Root Cause block as each node's torchrun prints it (a two-node Slurm run, this machine)."""
    return ("============================================================\n"
            "/v/site-packages/llamafactory/launcher.py FAILED\n"
            "------------------------------------------------------------\n"
            "Failures:\n  <NO_OTHER_FAILURES>\n"
            "------------------------------------------------------------\n"
            "Root Cause (first observed failure):\n[0]:\n"
            f"  time      : {time}\n  host      : localhost\n  rank      : {rank} (local_rank: 0)\n"
            f"  exitcode  : {exitcode}\n  error_file: <N/A>\n  traceback : {traceback}\n"
            "============================================================\n")


@pytest.mark.parametrize("killed_first_in_log", [True, False])
def test_of_several_nodes_summaries_the_earliest_failure_is_the_root(killed_first_in_log):
    """Two nodes, one torchrun each: node 1's rank was killed (SIGKILL, 02:25:28); node 0's rank then lost its
    peer and exited 1 (02:25:32). The log holds both blocks, in either order as the nodes' outputs interleave:
    the run's first failure is rank 1's, whatever comes last in the file."""
    from core.train.root_cause import read_torchrun_summary

    killed = _summary_block("2026-12-02_02:25:28", 1, "-9 (pid: 17763)  (SIGKILL)",
                            "Signal 9 (SIGKILL) received by PID 17763")
    lost = _summary_block("2026-12-02_02:25:32", 0, "1 (pid: 17764) ",
                          "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
    text = killed + lost if killed_first_in_log else lost + killed
    assert read_torchrun_summary(numbered(text)) == {"host": "localhost", "rank": 1, "exit_code": -9,
                                                     "signal": "SIGKILL"}
