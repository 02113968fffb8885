"""A real two-node Slurm cluster on the test machine (see ../shared/reference/multinode-on-one-machine.md).

Debian's slurmctld, two `slurmd -N` daemons (nodes n1 and n2 on 127.0.0.1) and munged, with the whole
configuration in a temporary folder reached through SLURM_CONF; everything is stopped by pid afterwards.
`make test` installs the packages (slurmd slurmctld slurm-client munge) where it runs as root; elsewhere the
tests that need the cluster are skipped and say why.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

NEEDED = ("slurmctld", "slurmd", "sbatch", "srun", "scontrol", "munged")
MUNGE_KEY = Path("/etc/munge/munge.key")


def missing_reason() -> str | None:
    lacking = [tool for tool in NEEDED if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()]
    if lacking:
        return f"Slurm is not installed here (missing {', '.join(lacking)}; make test installs it as root)"
    if os.geteuid() != 0:
        return "the test Slurm cluster runs its daemons as root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SlurmCluster:
    root: Path
    env: dict[str, str]
    pids: list[int]
    munged: int | None

    def run(self, *argv: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, **kw)

    def stop(self) -> None:
        subprocess.run(["scontrol", "shutdown"], env=self.env, capture_output=True, timeout=30)
        deadline = time.monotonic() + 10
        for pid in self._daemon_pids():
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if self.munged and _alive(self.munged):
            os.kill(self.munged, signal.SIGTERM)

    def _daemon_pids(self) -> list[int]:
        pids = []
        for pid_file in self.root.glob("*.pid"):
            try:
                pids.append(int(pid_file.read_text().strip()))
            except (OSError, ValueError):
                pass
        return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours is not alive
        return not Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def _start_munge() -> int | None:
    if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode == 0:
        return None  # already running (another test session's, or the machine's): leave it
    if not MUNGE_KEY.exists():
        MUNGE_KEY.parent.mkdir(parents=True, exist_ok=True)
        MUNGE_KEY.write_bytes(os.urandom(1024))
    shutil.chown(MUNGE_KEY, "munge", "munge")
    MUNGE_KEY.chmod(0o400)
    for d in ("/run/munge", "/var/log/munge", "/var/lib/munge"):
        Path(d).mkdir(parents=True, exist_ok=True)
        shutil.chown(d, "munge", "munge")
    subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged"], check=True, timeout=30)
    out = subprocess.run(["pgrep", "-x", "munged"], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None


def start_cluster(root: Path, nodes: int = 2) -> SlurmCluster:
    root.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname().split(".")[0]
    for d in ("state", "log", *[f"spool-n{i}" for i in range(1, nodes + 1)]):
        (root / d).mkdir(exist_ok=True)
    ctl_port = _free_port()
    node_lines = [f"NodeName=n{i} NodeHostname={host} NodeAddr=127.0.0.1 Port={_free_port()} CPUs=1 "
                  f"RealMemory=1000 State=UNKNOWN" for i in range(1, nodes + 1)]
    (root / "slurm.conf").write_text("\n".join([
        "ClusterName=devtune-test", f"SlurmctldHost={host}", f"SlurmctldPort={ctl_port}", "SlurmUser=root",
        "AuthType=auth/munge", f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool-%n",
        f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd-%n.pid",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "ReturnToService=2",
        "SchedulerType=sched/backfill", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        f"SlurmctldLogFile={root}/log/slurmctld.log", f"SlurmdLogFile={root}/log/slurmd-%n.log",
        "JobAcctGatherType=jobacct_gather/none", "MpiDefault=none", "MinJobAge=600", *node_lines,
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
    env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
    munged = _start_munge()
    subprocess.run(["slurmctld"], env=env, check=True, timeout=30)
    for i in range(1, nodes + 1):
        subprocess.run(["slurmd", "-N", f"n{i}"], env=env, check=True, timeout=30)
    cluster = SlurmCluster(root, env, [], munged)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out = cluster.run("sinfo", "-h", "-o", "%t %D").stdout.split()
        if out[:1] == ["idle"] and out[1:2] == [str(nodes)]:
            return cluster
        time.sleep(0.3)
    log = (root / "log" / "slurmctld.log").read_text(errors="replace")[-2000:]
    cluster.stop()
    raise RuntimeError(f"the test Slurm cluster did not come up: sinfo said {out}\n{log}")
