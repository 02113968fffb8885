"""The second held-apart set of issue 31 (tests/fixtures/logs/heldout2, SOURCES.md there): 22 failure logs built
from threads no rule was written from. Measured before any change: 1/22 right cause and fix, 16/22 root quoted,
4/22 no diagnosis. Each file: a diagnosis, the first one's id is one of `accept`, it quotes the root, and it says
the thing that makes it right (WORDS: a piece of its title, explanation or fix that the wrong diagnosis lacked).
KNOWN_MISSES lists the files still wrong and why (none today); a file there must still be wrong, so a fix is
noticed."""

import json
from pathlib import Path

import pytest

from core.train.failures import diagnose_files
from tests.heldout_sets import assert_apart, assert_exit_code_changes_nothing, assert_right

HELDOUT = Path(__file__).parents[1] / "fixtures" / "logs" / "heldout2"
EXPECTED = json.loads((HELDOUT / "expected.json").read_text(encoding="utf-8"))
KNOWN_MISSES: dict[str, str] = {}
WORDS = {  # what the right diagnosis says (the family's reasoning for this file)
    "vs_accelerate_dispatch_batches.log": "transformers and accelerate",  # not "a saved file"
    "vs_tokenizers_untagged_enum.log": "newer tokenizers",
    "vs_tokenizer_class_qwen2.log": "newer transformers",
    "vs_rope_scaling_llama31.log": "newer transformers",
    "res_slurm_cgroup_oom.log": "Slurm",
    "vllm_engine_core_driver_oom.log": "--gpu-memory-utilization",
    "net_nccl_p2p_unsupported.log": "NCCL_P2P_DISABLE=1",
    "net_gloo_connectfullmesh_vllm.log": "GLOO_SOCKET_IFNAME",
    "net_nccl_no_socket_interface.log": "NCCL_SOCKET_IFNAME",
    "net_nccl_ib_no_device.log": "NCCL_IB_HCA",
    "hang_tokenize_watchdog.log": "tokenized_path",
    "nat_gpu_hang_hw_exception.log": "amdgpu",
    "cfg_flash_attn_fp32.log": "bf16: true",
    "ckpt_adapter_size_mismatch.log": "base_model_name_or_path",
    "ckpt_safetensors_header_too_large.log": "git-lfs",
}



def test_the_set_is_apart_large_and_varied():
    assert len(EXPECTED) >= 20 and len({e["family"] for e in EXPECTED.values()}) >= 10
    assert_apart(HELDOUT, EXPECTED, ("heldout/SOURCES.md", "SOURCES.md"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_log_gets_a_right_cause_and_fix_and_quotes_its_root(name):
    assert_right(HELDOUT, name, EXPECTED[name], WORDS.get(name, ""), KNOWN_MISSES)


def test_the_exit_code_known_changes_nothing_that_was_right():
    assert_exit_code_changes_nothing(HELDOUT, EXPECTED, KNOWN_MISSES)


def test_a_rule_that_already_names_gpu_memory_gets_no_second_family_saying_it():
    ids = [d.id for d in diagnose_files([HELDOUT / "res_hip_oom_rank.log"])]
    assert ids[0] == "gpu-out-of-memory" and "resource-exhaustion" not in ids


def test_an_argument_the_other_library_removed_is_no_saved_file():
    first = diagnose_files([HELDOUT / "vs_accelerate_dispatch_batches.log"])[0]
    assert "saved file" not in first.title and "accelerate" in first.commands[0] + first.fix
