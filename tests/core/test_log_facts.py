"""core.train.log_facts: the shell commands a person pasted beside a log, in the prompt styles people paste them
with (bash on Debian and RHEL, cmd.exe, PowerShell, a bare `$`), and what the common ones showed."""

import pytest

from core.train import log_facts as facts


@pytest.mark.parametrize("line, cwd, host, command", [
    ("(lf) user@h800-1:~/LLaMA-Factory$ llamafactory-cli export x.yaml", "~/LLaMA-Factory", "h800-1",
     "llamafactory-cli export x.yaml"),
    ("root@ubuntu-vm:/workspace# ls", "/workspace", "ubuntu-vm", "ls"),
    ("[alice@login01 Qwen-VL]$ squeue -u alice", "Qwen-VL", "login01", "squeue -u alice"),
    ("(llama) PS C:\\Users\\esmail> dir data", "C:\\Users\\esmail", None, "dir data"),
    ("(base) D:\\LLaMA-Factory-main\\src>python train_web.py", "D:\\LLaMA-Factory-main\\src", None,
     "python train_web.py"),
    ("$ mount | grep /mnt/pool", None, None, "mount | grep /mnt/pool"),
])
def test_each_prompt_style_gives_its_directory_host_and_command(line, cwd, host, command):
    [cmd] = facts.shell_commands(line + "\noutput line\n")
    assert (cmd.cwd, cmd.host, cmd.command, cmd.output) == (cwd, host, command, ["output line"])


def test_log_lines_comments_and_a_yaml_are_no_prompts():
    text = ("$ cat train.yaml\n# model\nmodel_name_or_path: x\n[INFO|2024-09-17 09:31:55] >> C:\\x> y\n"
            "10/30/2023 10:12:41 - INFO - a $ b\n")
    [cmd] = facts.shell_commands(text)
    assert cmd.command == "cat train.yaml" and len(cmd.output) == 4


def test_cd_moves_the_directory_of_the_bare_prompts_after_it():
    cmds = facts.shell_commands("user@h:/work$ cd repo/src\n$ ls\n")
    assert cmds[1].cwd == "/work/repo/src"


def test_shown_files_are_parsed_yaml_json_and_grep_lines():
    text = ("u@h:~/LF$ cat examples/merge.yaml\nmodel_name_or_path: m\ntemplate: vicuna\n"
            "u@h:~/LF$ grep -nE \"visual_inputs|template\" examples/train.yaml\n3:visual_inputs: true\n5:template: v\n"
            "u@h:~/LF$ head -c 100 data/d.jsonl\n{\"text\": \"a\"}\n"
            "u@h:~/LF$ cat ds.json\n{\"bf16\": {\"enabled\": true}}\n"
            "u@h:~/LF$ cat a.yaml | grep x\nx: 1\n")
    shown = facts.shown_files(facts.shell_commands(text))
    assert [(f.path, f.partial) for f in shown] == [("~/LF/examples/merge.yaml", False),
                                                    ("~/LF/examples/train.yaml", True),
                                                    ("~/LF/data/d.jsonl", True), ("~/LF/ds.json", False)]
    assert facts.parsed(shown[0]) == {"model_name_or_path": "m", "template": "vicuna"}
    assert facts.parsed(shown[1]) == {"visual_inputs": True, "template": "v"}
    assert facts.parsed(shown[3]) == {"bf16": {"enabled": True}}


def test_listings_say_what_exists_and_what_does_not_in_each_shell():
    text = ("(llama) PS C:\\Users\\me> dir D:\\p\\LF\\data\\dataset_info.json\n\n    Directory: D:\\p\\LF\\data\n\n"
            "Mode                 LastWriteTime         Length Name\n----  -------------  ------ ----\n"
            "-a---           9/17/2024  9:12 AM          16384 dataset_info.json\n"
            "(llama) PS C:\\Users\\me> dir data\ndir : Cannot find path 'C:\\Users\\me\\data' because it does not exist.\n"
            "u@h:/srv$ ls -l models/x\nls: cannot access 'models/x': No such file or directory\n"
            "u@h:/srv$ ls weights\nmodel.safetensors\n")
    exist, missing = facts.listed_paths(facts.shell_commands(text))
    assert "D:\\p\\LF\\data\\dataset_info.json" in exist and "/srv/weights" in exist
    assert missing == {"C:\\Users\\me\\data", "/srv/models/x"}


def test_mounts_from_mount_and_df_and_lookups_that_found_nothing():
    text = ("$ mount | grep pool\nmergerfs on /mnt/pool type fuse.mergerfs (rw,relatime,allow_other)\n"
            "$ df -T /data\nFilesystem     Type 1K-blocks    Used Available Use% Mounted on\n"
            "nas:/export   nfs4  1000  10  990  1% /data\n"
            "root@vm:~# getent hosts vm; echo $?\n2\nroot@vm:~# getent hosts node1\n10.0.0.1  node1\n"
            "$ ping -c1 node2\nping: node2: Name or service not known\n")
    cmds = facts.shell_commands(text)
    assert facts.mounts(cmds) == [("/mnt/pool", "fuse.mergerfs", "rw,relatime,allow_other"), ("/data", "nfs4", "")]
    assert facts.unresolved_hosts(cmds) == ["vm", "node2"]
