"""`devtune diagnose` on real failure logs: the right cause first, with its lines and the fix."""

import json
from pathlib import Path

import pytest

from core.train.failures import MAX_SCAN, diagnose_files, diagnose_run, diagnose_text
from core.train.failure_rules import rules

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"

RUNS = {  # produced on this machine with the real llamafactory-cli
    "lf_undefined_dataset": ("dataset-undefined", "Undefined dataset support_faq in dataset_info.json"),
    "lf_no_valid_samples": ("dataset-no-valid-samples", "Cannot find valid samples"),
    "lf_missing_column": ("dataset-missing-column", "KeyError: 'instruction'"),
    "lf_json_parse_error": ("dataset-json-error", "JSON parse error"),
    "lf_unknown_template": ("template-unknown", "Template llama-3 does not exist"),
    "lf_deepspeed_without_force_torchrun": ("force-torchrun", "FORCE_TORCHRUN=1"),
    "lf_torchrun_not_on_path": ("torchrun-not-found", "'torchrun'"),
    "lf_torchrun_worker_sigkill": ("oom-killer", "SIGKILL"),
    "lf_checkpoint_invalid_zero3": ("checkpoint-invalid", "Can't find a valid checkpoint at saves/demo/checkpoint-4"),
    "lf_model_offline_not_cached": ("hub-offline-not-cached", "outgoing traffic has been disabled"),
    "lf_trust_remote_code": ("trust-remote-code", "contains custom code"),
    "lf_master_port_in_use": ("master-port-in-use", "EADDRINUSE"),
    "lf_dataset_info_missing": ("dataset-info-unreadable", "Cannot open nodata/dataset_info.json"),
    "lf_dataset_file_missing": ("dataset-file-missing", "File gone/rows_v2.jsonl not found."),
    "lf_zero_world_size_changed": ("zero-world-size-changed", "used a DP world size of 2 but the current world size is 1"),
    "slurm_time_limit": ("slurm-time-limit", "DUE TO TIME LIMIT"),
    # export and merge (llamafactory-cli export), native crashes of a torchrun worker
    "lf_export_dir_missing": ("export-dir-missing", "Please specify `export_dir` to save model."),
    "lf_export_adapter_missing": ("adapter-not-found", "Can't find 'adapter_config.json' at 'saves/nope'"),
    "lf_export_quantized_no_bitsandbytes": ("bitsandbytes-missing", "'bitsandbytes>=0.39.0' distribution was not found"),
    "lf_export_quantize_unmerged": ("export-quantize-unmerged", "Please merge adapters before quantizing the model."),
    "lf_export_quantization_no_dataset": ("export-quantization-dataset", "Quantization dataset is necessary"),
    "lf_export_size_invalid": ("export-size-invalid", "Could not parse the size value from '2GBGB'"),
    "lf_worker_segfault": ("segfault", "Fatal Python error: Segmentation fault"),
    # launch, model access, data, kernels, serving
    "lf_master_addr_unresolvable": ("master-addr-unresolvable", "(gai error: -2 - Name or service not known)"),
    "lf_model_config_missing": ("model-config-missing", "Should have a `model_type` key in its config.json"),
    "lf_model_type_unknown": ("model-type-unknown", "Transformers does not recognize this architecture"),
    "lf_dataset_wrong_stage": ("dataset-wrong-stage", "not applicable in the current training stage"),
    "lf_dataset_file_type": ("dataset-file-type", "Allowed file types: "),
    "lf_val_size_with_eval_dataset": ("val-size-with-eval-dataset", "Cannot specify `val_size`"),
    "lf_liger_not_installed": ("liger-missing", "'liger-kernel' distribution was not found"),
    "vllm_max_model_len_too_long": ("vllm-max-model-len", "User-specified max_model_len (65536)"),
    "vllm_tokenizer_missing": ("tokenizer-not-loadable", "Couldn't instantiate the backend tokenizer"),
}
EXCERPTS = {  # published logs, see tests/fixtures/logs/SOURCES.md
    "hip_out_of_memory.log": "gpu-out-of-memory",
    "cuda_out_of_memory_ranked.log": "gpu-out-of-memory",
    "hip_no_binary_for_gpu.log": "hip-no-binary",
    "isa_mismatch_flash_attn.log": "isa-mismatch",
    "illegal_instruction_import_torch.log": "illegal-instruction",
    "rccl_missing_iommu_pt.log": "rccl-iommu",
    "nccl_shm_no_space.log": "shared-memory",
    "dataloader_bus_error_shm.log": "shared-memory",
    "nccl_watchdog_timeout.log": "nccl-timeout",
    "bitsandbytes_rocm_binary_missing.log": "bitsandbytes-rocm",
    "disk_full_saving.log": "disk-full",
    "json_column_changed.log": "dataset-json-error",
    "no_hip_gpus.log": "no-gpu-visible",
    "hub_gated_model.log": "hub-gated-model",
    "flash_attn_not_installed.log": "flash-attn-missing",
    "flash_attn_undefined_symbol.log": "flash-attn-abi",
    "hip_invalid_device_function.log": "hip-invalid-device-function",
    "deepspeed_cuda_home_missing.log": "deepspeed-no-toolkit",
    "rendezvous_clients_not_joined.log": "rendezvous-timeout",
    "vllm_kv_cache_too_small.log": "vllm-kv-cache-too-small",
    "chat_template_missing.log": "chat-template-missing",
    "dependency_version_check.log": "dependency-version",
    "output_dir_not_empty.log": "output-dir-not-empty",
    "nccl_unhandled_system_error.log": "nccl-error",
    "gloo_peer_reset.log": "peer-rank-died",
    "slurm_preempted.log": "slurm-preempted",
    "slurm_node_fail.log": "slurm-node-fail",
    "nccl_version_mismatch.log": "nccl-version-mismatch",
    "process_group_init_timeout.log": "process-group-init-timeout",
    "image_token_mismatch.log": "image-token-mismatch",
    "cuda_no_kernel_image.log": "cuda-no-kernel-image",
    "sdpa_unsupported.log": "sdpa-unsupported",
    "bitsandbytes_cuda_cpu_build.log": "bitsandbytes-cuda",
    "host_cpu_allocator_oom.log": "host-out-of-memory",
    "vllm_gpu_memory_utilization.log": "vllm-gpu-memory-utilization",
    "export_quantized_base.log": "export-quantized-merge",
    "hub_repo_not_found.log": "hub-repo-not-found",
    "dataset_columns_differ.log": "dataset-columns-differ",
    "flash_attn_s_aux_none.log": "flash-attn-s-aux",
}


def exit_code(folder: Path) -> int:
    return int((folder / "exit_code").read_text())


@pytest.mark.parametrize("folder", sorted(RUNS))
def test_real_failures_produced_here(folder):
    expected_id, expected_text = RUNS[folder]
    found = diagnose_run(LOGS / folder, exit_code=exit_code(LOGS / folder))
    assert found, folder
    top = found[0]
    assert top.id == expected_id
    assert any(expected_text in e.text for e in top.evidence)
    for e in top.evidence:  # evidence points at the real line
        if e.line is not None:
            lines = Path(e.file).read_bytes().decode(errors="replace").split("\n")  # as sed -n Np counts
            assert e.text.split("\r")[-1][:40] in lines[e.line - 1]
    assert top.fix and top.title and top.explanation


@pytest.mark.parametrize("name", sorted(EXCERPTS))
def test_published_failures(name):
    found = diagnose_files([LOGS / "issues" / name])
    assert found[0].id == EXCERPTS[name]


def test_every_rule_with_patterns_has_a_fixture():
    covered = {rule_id for rule_id, _text in RUNS.values()} | set(EXCERPTS.values())
    untested = {r.id for r in rules() if r.patterns} - covered - {"aborted"}  # aborted: above
    assert not untested, f"rules without a log fixture: {sorted(untested)}"


@pytest.mark.parametrize("folder", ["lf_normal", "lf_nan_loss", "lf_loss_zero"])
def test_runs_that_ended_well_have_nothing_to_diagnose(folder):
    assert diagnose_run(LOGS / folder, exit_code=exit_code(LOGS / folder)) == []


def test_graceful_stop_is_not_a_failure():
    part1 = LOGS / "lf_resume"
    assert diagnose_files([part1 / "part1.stdout.log"], exit_code=0, stop_requested=True) == []
    text = "step 12\nAborted (core dumped)\n"  # SIGABRT before LLaMA-Factory installed its handler
    assert diagnose_text(text, exit_code=134, stop_requested=True) == []
    assert [d.id for d in diagnose_text(text, exit_code=134)] == ["aborted"]
    assert diagnose_text("", exit_code=143, stop_requested=True) == []


def test_exit_status_alone_is_evidence():
    (d,) = diagnose_text("{'loss': '2.1'}\n", exit_code=137)
    assert d.id == "oom-killer" and d.evidence[-1].line is None and "137" in d.evidence[-1].text
    (d,) = diagnose_text("", exit_code=-9)
    assert d.id == "oom-killer"
    (d,) = diagnose_text("nothing useful\n", exit_code=3)
    assert d.id == "unexplained-failure"


def test_the_error_that_ended_the_run_outranks_an_earlier_warning():
    text = ((LOGS / "issues" / "rccl_missing_iommu_pt.log").read_text()
            + (LOGS / "issues" / "hip_out_of_memory.log").read_text())
    ids = [d.id for d in diagnose_text(text, exit_code=1)]
    assert ids == ["gpu-out-of-memory", "rccl-iommu"]


def test_isa_mismatch_explains_the_no_binary_error_that_follows():
    ids = [d.id for d in diagnose_files([LOGS / "issues" / "isa_mismatch_flash_attn.log"], exit_code=134)]
    assert ids[0] == "isa-mismatch" and "hip-no-binary" not in ids


def test_shm_no_space_is_not_a_full_disk():
    ids = [d.id for d in diagnose_files([LOGS / "issues" / "nccl_shm_no_space.log"])]
    assert "disk-full" not in ids


def test_tqdm_line_evidence_is_the_relevant_piece():
    text = "\r 10%|█         | 2/20 [00:02<00:18,  1.01it/s]\rtorch.OutOfMemoryError: HIP out of memory. Tried\r\n"
    (d,) = diagnose_text(text)
    assert d.evidence[0].text.startswith("torch.OutOfMemoryError") and d.evidence[0].line == 1


def test_big_logs_are_read_at_head_and_tail_with_true_line_numbers(tmp_path):
    path = tmp_path / "stderr.log"
    filler = "\r  5%|▌         | 1/20 [00:01<00:19,  1.02s/it]" * 20 + "\n"
    count = MAX_SCAN // len(filler.encode()) + 5000
    with open(path, "w") as fh:
        fh.write('NCCL WARN Missing "iommu=pt" from kernel command line\n')
        for _ in range(count):
            fh.write(filler)
        fh.write("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB.\n")
    found = {d.id: d for d in diagnose_files([path])}
    assert found["rccl-iommu"].evidence[0].line == 1
    assert found["gpu-out-of-memory"].evidence[0].line == count + 2


def test_rules_are_well_formed():
    table = rules()
    assert len({r.id for r in table}) == len(table)
    for r in table:
        assert r.patterns or r.exit_codes, r.id
        assert r.title and r.explanation and r.fix
    known = {r.id for r in table}
    assert all(s in known for r in table for s in r.suppresses)


def test_cli_exit_codes_and_json(devtune_cli):
    proc = devtune_cli("diagnose", "--json", str(LOGS / "lf_unknown_template"))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    first = doc["diagnoses"][0]
    assert {"id", "title", "evidence", "fix"} <= set(first) and first["id"] == "template-unknown"
    assert first["evidence"][0]["line"] and first["evidence"][0]["file"].endswith("stderr.log")
    ok = devtune_cli("diagnose", str(LOGS / "lf_normal" / "stdout.log"))
    assert ok.returncode == 0 and "No known failure" in ok.stdout
    missing = devtune_cli("diagnose", str(LOGS / "no-such.log"))
    assert missing.returncode == 2 and "no-such.log" in missing.stderr
    human = devtune_cli("diagnose", "--exit-code", "137", str(LOGS / "lf_normal" / "stdout.log"))
    assert human.returncode == 1 and "[oom-killer]" in human.stdout and "$ free -g" in human.stdout


def test_a_message_after_many_tqdm_redraws_is_found_in_the_lines_last_piece():
    bars = "".join(f"\r {i:>3}/640 [00:{i:02d}<09:00,  1.10it/s]" for i in range(1, 9))
    text = f"step\n{bars}\r[rank0]: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB\nend\n"
    (d,) = diagnose_text(text)
    assert d.id == "gpu-out-of-memory" and d.evidence[0].line == 2
    assert d.evidence[0].text.startswith("[rank0]: torch.OutOfMemoryError")
