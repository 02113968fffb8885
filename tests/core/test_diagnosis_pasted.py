"""core.train.diagnosis_pasted: what the person's own shell commands showed of the set-up decides the cause. Each
reason on the real logs of the held-apart sets it was written from (heldout6-8), on other shells and other
messages of the same family, and not where the facts say otherwise."""

from pathlib import Path

import pytest

from core.train.diagnosis_pasted import pasted_finding
from core.train.failures import diagnose_files, diagnose_text

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


def finding(text: str, root: str):
    lines = list(enumerate(text.splitlines(), 1))
    return pasted_finding(root, "", lines=lines, root_line=len(lines) + 1)


@pytest.mark.parametrize("log, fid, words", [
    ("heldout6/data_dataset_info_wrong_cwd.log", "wrong-directory", "cd D:\\LLaMA-Factory-main"),
    ("heldout8/data_webui_cwd_dataset_info.log", "wrong-directory", "cd D:\\projects\\LLaMA-Factory"),
    ("heldout8/slurm_multinode_master_addr_localhost.log", "multinode-loopback", "MASTER_ADDR"),
    ("heldout7/c10d_store_hostname_not_in_hosts.log", "host-unresolved", "192.168.56.101 ubuntu-vm"),
    ("heldout6/fs_safetensors_mergerfs_mmap.log", "file-system", "cache.files=partial"),
    ("heldout8/ds_zero3_single_gpu_no_torchrun.log", "zero3-no-launcher", "FORCE_TORCHRUN=1"),
    ("heldout8/export_llava_without_visual_inputs.log", "config-drift", "visual_inputs: True"),
    ("heldout8/data_pretrain_text_column_unmapped.log", "dataset-columns", '"columns": {"prompt": "text"}'),
])
def test_the_real_logs_get_the_fact_their_cause_is_read_from(log, fid, words):
    first = diagnose_files([LOGS / log])[0]
    assert first.id == fid and words in first.fix + " ".join(first.commands), (first.id, first.fix)


def test_a_relative_path_from_a_bash_prompt_in_a_subfolder():
    text = ("alice@gpu1:~/LLaMA-Factory/src$ ls ../data/dataset_info.json\n../data/dataset_info.json\n"
            "alice@gpu1:~/LLaMA-Factory/src$ llamafactory-cli train ../examples/x.yaml\n"
            "FileNotFoundError: [Errno 2] No such file or directory: 'data/dataset_info.json'\n")
    found = finding(text, "FileNotFoundError: [Errno 2] No such file or directory: 'data/dataset_info.json'")
    assert found.id == "wrong-directory" and "cd ~/LLaMA-Factory" in found.fix


def test_a_relative_path_that_is_where_the_prompt_is_is_not_the_working_directory():
    text = ("alice@gpu1:~/LF$ ls data/dataset_info.json\ndata/dataset_info.json\n"
            "alice@gpu1:~/LF$ llamafactory-cli train x.yaml\n")
    assert finding(text, "FileNotFoundError: [Errno 2] No such file or directory: 'data/dataset_info.json'") is None


def test_several_nodes_at_the_loopback_on_a_torchrun_rendezvous_endpoint():
    text = ("$ srun -N2 --label torchrun --nnodes=2 --rdzv_endpoint=127.0.0.1:29500 train.py\n"
            "slurmstepd: error: *** STEP 12.0 ON node03 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***\n"
            "slurmstepd: error: *** STEP 12.0 ON node04 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***\n")
    found = finding(text, "torch.distributed.DistNetworkError: The client socket has timed out")
    assert found.id == "multinode-loopback" and "node03, node04" in " ".join(found.facts)


def test_several_nodes_on_one_host_may_use_the_loopback():
    text = ("$ torchrun --nnodes 2 --master_addr localhost train.py\n"
            "slurmstepd: error: *** JOB 7 ON devbox CANCELLED AT 2024-05-01T10:00:00 ***\n")
    assert finding(text, "RuntimeError: timed out") is None
    assert finding("$ torchrun --nnodes 2 --master_addr 10.0.0.5 train.py\n", "RuntimeError: timed out") is None


def test_an_unresolved_host_only_for_a_network_error():
    text = "$ ping -c1 gpu-node-2\nping: gpu-node-2: Name or service not known\n"
    assert finding(text, "RuntimeError: The server socket has failed to connect to gpu-node-2:29500").id == \
        "host-unresolved"
    assert finding(text, "ValueError: Cannot find valid samples") is None


def test_a_network_file_system_under_the_model_and_a_local_one():
    nfs = ("$ df -T /nfs/models\nFilesystem Type 1K-blocks Used Available Use% Mounted on\n"
           "nas:/vol nfs4 1000 10 990 1% /nfs/models\n$ python load.py /nfs/models/qwen\n")
    found = finding(nfs, "OSError: [Errno 95] Operation not supported")
    assert found.id == "file-system" and "nfs4" in found.title
    local = nfs.replace("nfs4", "ext4")
    assert finding(local, "OSError: [Errno 95] Operation not supported") is None


def test_zero3_in_a_launcher_is_no_plain_process():
    text = ("deepspeed: examples/deepspeed/ds_z3_config.json\n"
            "INFO - Process rank: 0, world size: 2, device: cuda:0, n_gpu: 1, distributed training: True\n")
    assert finding(text, "RuntimeError: 'weight' must be 2-D") is None


def test_an_export_config_that_keeps_the_training_settings_has_no_drift():
    text = ("u@h:~/LF$ grep -E 'visual_inputs|template' examples/train_lora/a.yaml\nvisual_inputs: true\n"
            "template: vicuna\nu@h:~/LF$ cat examples/merge_lora/a.yaml\nmodel_name_or_path: m\n"
            "visual_inputs: true\ntemplate: vicuna\nu@h:~/LF$ llamafactory-cli export examples/merge_lora/a.yaml\n")
    assert finding(text, "ValueError: Unrecognized configuration class") is None
    drifted = text.replace("visual_inputs: true\ntemplate: vicuna\nu@h:~/LF$ llamafactory-cli",
                           "template: qwen\nu@h:~/LF$ llamafactory-cli")
    found = finding(drifted, "ValueError: Unrecognized configuration class")
    assert found.id == "config-drift" and "visual_inputs: True" in found.fix and "template: vicuna" in found.fix


def test_sharegpt_columns_from_the_message_itself():
    text = ("u@h:~/LF$ grep -A3 '\"chats\"' data/dataset_info.json\n  \"chats\": {\n    \"file_name\": \"c.json\",\n"
            "    \"formatting\": \"sharegpt\"\nu@h:~/LF$ llamafactory-cli train x.yaml\n")
    root = "KeyError: 'conversations'"
    assert finding(text, root) is None  # the file's columns are not known
    root = "ValueError: Column conversations not in the dataset. Current columns in the dataset: ['messages', 'id']"
    found = finding(text, root)
    assert found.id == "dataset-columns" and '"columns": {"messages": "messages"}' in found.fix


def test_without_pasted_commands_nothing_changes():
    text = "FileNotFoundError: [Errno 2] No such file or directory: 'data/dataset_info.json'\n"
    assert diagnose_text(text)[0].id != "wrong-directory"
