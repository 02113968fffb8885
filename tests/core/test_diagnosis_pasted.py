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
    ("heldout8/serve_vllm_remote_code_config_missing.log", "remote-code-files", "hf download mosaicml/mpt-30b"),
    ("heldout6/mem_host_ram_killed_chat.log", "ram-below-model", "more RAM"),
    ("heldout7/nccl_shm_open_permission_denied.log", "not-writable", "sudo chmod 1777 /dev/shm"),
    ("heldout8/ollama_adapter_file_not_folder.log", "wrong-path-kind", "/Users/user/ollama_exp"),
    ("heldout8/tgi_model_id_cache_root.log", "wrong-path-kind", "snapshots/11c5a3d5811f50298f278a704980280950aedb10/"),
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


def test_a_weights_file_given_for_an_adapter_in_a_yaml_and_in_a_vllm_flag():
    listing = ("u@h:~/LF$ ls saves/qwen/lora\nadapter_config.json  adapter_model.safetensors  trainer_log.jsonl\n")
    yaml = (listing + "u@h:~/LF$ cat chat.yaml\nmodel_name_or_path: Qwen/Qwen2.5-7B\n"
            "adapter_name_or_path: ./saves/qwen/lora/adapter_model.safetensors\nu@h:~/LF$ llamafactory-cli chat chat.yaml\n")
    found = finding(yaml, "ValueError: Can't find 'adapter_config.json' at './saves/qwen/lora/adapter_model.safetensors'")
    assert found.id == "wrong-path-kind" and found.fix.endswith("./saves/qwen/lora") and "chat.yaml" in found.fix
    flag = ("root@box:/srv# ls /srv/lora\nadapter_config.json adapter_model.safetensors\n"
            "root@box:/srv# vllm serve Qwen/Qwen2.5-7B --enable-lora --lora-modules sql=/srv/lora/adapter_model.safetensors\n")
    found = finding(flag, "FileNotFoundError: No such file or directory: '/srv/lora/adapter_model.safetensors/adapter_config.json'")
    assert found.id == "wrong-path-kind" and "/srv/lora" in found.fix


def test_a_hub_cache_root_given_to_vllm_and_a_real_model_folder():
    text = ("$ ls ~/.cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B\nblobs  refs  snapshots\n"
            "$ vllm serve ~/.cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B\n")
    root = "OSError: Can't load the configuration: no file named config.json in ~/.cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B"
    found = finding(text, root)
    assert found.id == "wrong-path-kind" and "snapshots/<revision>" in found.fix
    real = text.replace("blobs  refs  snapshots", "config.json  model.safetensors  tokenizer.json")
    assert finding(real, root) is None


def test_a_merged_folder_without_the_modeling_file_its_auto_map_names():
    text = ("u@h:~/LF$ ls output/qwen7b-merged\nconfig.json  model-00001-of-00002.safetensors  qwen.tiktoken\n"
            "u@h:~/LF$ cat output/qwen7b-merged/config.json\n{\"architectures\": [\"QWenLMHeadModel\"], \"auto_map\": "
            "{\"AutoConfig\": \"configuration_qwen.QWenConfig\", \"AutoModelForCausalLM\": \"modeling_qwen.QWenLMHeadModel\"}}\n"
            "u@h:~/LF$ llamafactory-cli chat --model_name_or_path output/qwen7b-merged --template qwen\n")
    root = "ModuleNotFoundError: No module named 'transformers_modules.qwen7b-merged.modeling_qwen'"
    found = finding(text, root)
    assert found.id == "remote-code-files" and "configuration_qwen.py, modeling_qwen.py" in found.title
    assert found.commands[0].startswith("cp <base model folder>/*.py")
    complete = text.replace("qwen.tiktoken", "qwen.tiktoken configuration_qwen.py modeling_qwen.py")
    assert finding(complete, root) is None


def test_an_output_folder_owned_by_root_and_what_is_no_permission_problem():
    text = ("[bob@gpu2 LF]$ ls -ld /data/saves\ndrwxr-xr-x 3 root root 4096 May  2 10:00 /data/saves\n"
            "[bob@gpu2 LF]$ llamafactory-cli train x.yaml\n"
            "PermissionError: [Errno 13] Permission denied: '/data/saves/qwen-lora'\n")
    found = finding(text, "PermissionError: [Errno 13] Permission denied: '/data/saves/qwen-lora'")
    assert found.id == "not-writable" and found.commands[0] == "sudo chown bob /data/saves"
    assert finding(text.replace("[bob@gpu2", "[root@gpu2"), "PermissionError: [Errno 13]") is None
    assert finding(text.replace("drwxr-xr-x 3 root root", "drwxrwxr-x 3 root bob"), "PermissionError") is None


def test_a_gpu_container_without_the_nvidia_runtime_in_two_messages():
    text = ("user@box:~$ docker run --gpus all -it img bash\n"
            "docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].\n"
            "user@box:~$ docker info 2>/dev/null | grep -i runtimes\n Runtimes: io.containerd.runc.v2 runc\n")
    found = finding(text, 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].')
    assert found.id == "container-gpu-runtime" and "Runtimes: io.containerd.runc.v2 runc" in " ".join(found.facts)
    runtime = "user@box:~$ docker run --runtime=nvidia img\ndocker: Error response from daemon: unknown or invalid runtime name: nvidia.\n"
    assert finding(runtime, "docker: Error response from daemon: unknown or invalid runtime name: nvidia.").id == \
        "container-gpu-runtime"
    with_it = text.replace("runc.v2 runc", "runc.v2 nvidia runc")
    assert finding(with_it, 'could not select device driver "" with capabilities: [[gpu]]') is None


@pytest.mark.parametrize("line, name", [
    ("'llamafactory-cli' is not recognized as an internal or external command,", "llamafactory-cli"),
    ("llamafactory-cli : The term 'llamafactory-cli' is not recognized as the name of a cmdlet, function, script "
     "file, or operable program.", "llamafactory-cli"),
    ("zsh: command not found: llamafactory-cli", "llamafactory-cli"),
    ("'llamafactory-cli' \ufffd\ufffd\ufffd\ufffd\u06b2\ufffd\ufffd\ufffd\u2cbf\ufffd\ufffd", "llamafactory-cli"),
])
def test_a_missing_command_in_every_shell_and_code_page(line, name):
    first = diagnose_text("Running on local URL:  http://0.0.0.0:7860\n" + line + "\n")[0]
    assert first.id == "missing-command" and name in first.title


def test_a_model_larger_than_ram_and_swap_in_free_h_units():
    text = ("u@box:~$ free -h\n               total        used        free\nMem:            31Gi       2.1Gi        28Gi\n"
            "Swap:          2.0Gi          0B       2.0Gi\nu@box:~$ du -sh /data/Llama-3-70B\n132G\t/data/Llama-3-70B\n"
            "u@box:~$ llamafactory-cli chat --model_name_or_path /data/Llama-3-70B --template llama3\n"
            "Loading checkpoint shards:  23%|##3       | 7/30\nKilled\n")
    found = finding(text, "Killed")
    assert found.id == "ram-below-model" and "132 GiB" in found.title and "33 GiB" in found.title
    small = text.replace("132G\t", "15G\t")
    assert finding(small, "Killed") is None


def test_a_bus_error_with_a_small_and_a_large_dev_shm():
    small = ("root@c0ffee:/w# df -h /dev/shm\nFilesystem Size Used Avail Use% Mounted on\nshm 64M 0 64M 0% /dev/shm\n"
             "root@c0ffee:/w# torchrun --nproc_per_node 2 train.py\nBus error (core dumped)\n")
    found = finding(small, "Bus error (core dumped)")
    assert found.id == "shared-memory" and "--shm-size" in found.fix
    assert finding(small.replace("64M 0 64M", "32G 0 32G"), "Bus error (core dumped)") is None
