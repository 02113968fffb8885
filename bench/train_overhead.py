"""A devtune-launched run against the same YAML run directly with `llamafactory-cli` (issues 6 and 16).

Both train the tiny model on CPU with the same config and environment; the figure is the ratio of
LLaMA-Factory's own `train_runtime` (train_results.json), devtune / direct. Target <= 1.05.
Runs are interleaved (direct, devtune, direct, devtune, ...) and the medians compared. Three cases:

    one     one process: start_run against llamafactory-cli train
    two     ZeRO-3 on two processes (torchrun, gloo): `devtune train` (launch_training) against
            FORCE_TORCHRUN=1 NPROC_PER_NODE=2 llamafactory-cli train by hand
    slurm   ZeRO-3 across two Slurm nodes (a real cluster on this machine, tests/slurm_cluster.py; root):
            `devtune train` against the same sbatch script submitted by hand; also devtune's own time
            from `devtune train` to the job submitted, with the srun preflight apart

    .venv/bin/python bench/train_overhead.py [--pairs 3] [--steps 300] [--cases one,two,slurm]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.train.runs import refresh, run_dir, start_run  # noqa: E402
from core.setup.tinymodel import build_tiny_model  # noqa: E402
from core.train.launch import training_env  # noqa: E402
from core.workspace.layout import Workspace  # noqa: E402

LF = str(Path(sys.executable).parent / "llamafactory-cli")


def write_workspace(ws: Workspace, model: Path, steps: int) -> None:
    rows = [{"instruction": f"问题{i}：怎么办理第{i}项业务？", "input": "", "output": f"请在App中选择业务{i}并提交。"}
            for i in range(32)]
    (ws.data_dir / "rows.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    (ws.data_dir / "dataset_info.json").write_text(json.dumps({"rows": {"file_name": "rows.jsonl"}}))
    import yaml

    for name in ("direct", "devtune"):
        cfg = {"model_name_or_path": str(model), "stage": "sft", "do_train": True, "finetuning_type": "lora",
               "lora_rank": 8, "lora_target": "all", "dataset": "rows", "dataset_dir": "data", "template": "llama3",
               "cutoff_len": 128, "preprocessing_num_workers": 1, "output_dir": f"saves/{name}",
               "logging_steps": 5, "save_steps": 100000, "max_steps": steps, "plot_loss": False, "report_to": "none",
               "per_device_train_batch_size": 2, "learning_rate": 1e-3, "bf16": False, "overwrite_output_dir": True}
        (ws.configs_dir / f"{name}.yaml").write_text(yaml.safe_dump(cfg))


def runtime(ws: Workspace, name: str) -> float:
    return float(json.loads((ws.root / "saves" / name / "train_results.json").read_text())["train_runtime"])


def run_direct(ws: Workspace, env: dict) -> float:
    subprocess.run([LF, "train", "configs/direct.yaml"], cwd=ws.root, env={**os.environ, **env}, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return runtime(ws, "direct")


def run_devtune(ws: Workspace, env: dict) -> float:
    rec = start_run(ws, [LF, "train", "configs/devtune.yaml"], env=env, label="bench", config="configs/devtune.yaml",
                    output_dir="saves/devtune")
    while refresh(run_dir(ws, rec.id)).active:
        time.sleep(0.2)
    final = refresh(run_dir(ws, rec.id))
    if final.exit_code != 0:
        raise SystemExit(f"devtune run failed: {final.note}")
    return runtime(ws, "devtune")


def scale_config(ws: Workspace, model: Path, steps: int, *, nodes: int, procs: int, launcher: str) -> str:
    """configs/<name>.yaml of a ZeRO-3 run written by devtune (its launch settings in the sidecar)."""
    from core.config.files import save_config
    from core.config.presets import cpu_demo
    from core.config.spec import Launch

    name = f"z3-{launcher}"
    spec = cpu_demo(["rows"]).model_copy(update={
        "model_name_or_path": str(model), "max_steps": steps, "save_steps": 100000, "output_dir": f"saves/{name}",
        "zero_stage": 3, "launch": Launch(device="cpu", gpus_per_node=procs, nnodes=nodes, omp_threads=1,
                                          launcher=launcher)})
    save_config(ws, spec, f"configs/{name}.yaml", force=True)
    return f"configs/{name}.yaml"


def _wait_run(ws: Workspace, run_id: str) -> str:
    while refresh(run_dir(ws, run_id)).active:
        time.sleep(0.2)
    final = refresh(run_dir(ws, run_id))
    if final.exit_code != 0:
        raise SystemExit(f"devtune run {run_id} failed: {final.note}")
    return final.output_dir


def _direct_copy(ws: Workspace, config: str) -> str:
    """The same YAML with its own output_dir, overwritten each time (what a person's own runs do)."""
    import re

    text = (ws.root / config).read_text()
    text = re.sub(r"^output_dir: .*$", "output_dir: saves/direct-scale", text, flags=re.M)
    text = re.sub(r"^overwrite_output_dir: .*$", "overwrite_output_dir: true", text, flags=re.M)
    (ws.root / "configs" / "direct-scale.yaml").write_text(text)
    return "configs/direct-scale.yaml"


def case_two(ws: Workspace, model: Path, steps: int, pairs: int, env: dict) -> tuple[list[float], list[float]]:
    from core.config.files import launch_env, load_spec
    from core.train.launch import launch_training

    config = scale_config(ws, model, steps, nodes=1, procs=2, launcher="local")
    direct_cfg = _direct_copy(ws, config)
    direct_env = {**os.environ, **env, **launch_env(load_spec(ws, config))}
    direct, launched = [], []
    for _ in range(pairs):
        subprocess.run([LF, "train", direct_cfg], cwd=ws.root, env=direct_env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        direct.append(runtime(ws, "direct-scale"))
        out = _wait_run(ws, launch_training(ws, config).id)
        launched.append(runtime(ws, Path(out).name))
    return direct, launched


def case_slurm(ws: Workspace, model: Path, steps: int, pairs: int, env: dict) -> tuple[list[float], list[float]]:
    import core.train.slurm as slurm
    from core.config.files import launch_env, load_spec
    from core.train.launch import launch_training
    from core.train.slurm_launch import slurm_job
    from tests.slurm_cluster import missing_reason, start_cluster

    if missing_reason():
        raise SystemExit(f"slurm case skipped: {missing_reason()}")
    cluster = start_cluster(ws.root.parent / "cluster")
    os.environ["SLURM_CONF"] = cluster.env["SLURM_CONF"]
    try:
        config = scale_config(ws, model, steps, nodes=2, procs=1, launcher="slurm")
        direct_cfg = _direct_copy(ws, config)
        spec = load_spec(ws, config)
        hand = ws.root / "hand"
        hand.mkdir(exist_ok=True)
        job = slurm_job(ws, spec, hand, [LF, "train", direct_cfg], {**env, **launch_env(spec)})
        (hand / "job.sbatch").write_text(slurm.render_sbatch(job))
        direct, launched, own, preflight = [], [], [], []
        real_preflight = slurm.run_preflight

        def timed_preflight(*a, **kw):
            t = time.perf_counter()
            try:
                return real_preflight(*a, **kw)
            finally:
                preflight.append(time.perf_counter() - t)

        import core.train.slurm_launch as slurm_launch

        slurm_launch.run_preflight = timed_preflight
        for _ in range(pairs):
            job_id = slurm.submit(hand / "job.sbatch")
            if slurm.wait(job_id).state != "COMPLETED":
                raise SystemExit(f"the hand-submitted job {job_id} did not complete; see {hand}/stderr.log")
            direct.append(runtime(ws, "direct-scale"))
            t = time.perf_counter()
            record = launch_training(ws, config)
            own.append(time.perf_counter() - t - preflight[-1])
            launched.append(runtime(ws, Path(_wait_run(ws, record.id)).name))
        print(f"  devtune train -> job submitted: {statistics.median(own):.2f} s of devtune's own time "
              f"(median; target <= 2 s), srun preflight {statistics.median(preflight):.2f} s apart")
        return direct, launched
    finally:
        cluster.stop()


def _report(title: str, direct: list[float], launched: list[float]) -> None:
    d, v = statistics.median(direct), statistics.median(launched)
    print(title)
    print(f"  llamafactory-cli directly : {d:6.2f} s   {[round(x, 2) for x in direct]}")
    print(f"  launched by devtune       : {v:6.2f} s   {[round(x, 2) for x in launched]}")
    print(f"  devtune / direct          = {v / d:5.3f}x   (target <= 1.05)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--cases", default="one,two,slurm", help="comma-separated: one, two, slurm")
    args = parser.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_model(Path(tmp) / "tiny", ROOT / "data")
        ws = Workspace(Path(tmp) / "ws").ensure()
        write_workspace(ws, model, args.steps)
        env = training_env(ws, {"OMP_NUM_THREADS": "1"}, "saves/devtune")
        env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
        os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
        head = f"{args.pairs} interleaved pairs, {args.steps} steps of the tiny model (medians of train_runtime)"
        if "one" in cases:
            direct, launched = [], []
            for _ in range(args.pairs):
                direct.append(run_direct(ws, env))
                launched.append(run_devtune(ws, env))
            _report(f"one process: {head}", direct, launched)
        if "two" in cases:
            _report(f"ZeRO-3, two processes: {head}", *case_two(ws, model, args.steps, args.pairs, env))
        if "slurm" in cases:
            _report(f"ZeRO-3, two Slurm nodes: {head}", *case_slurm(ws, model, args.steps, args.pairs, env))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
