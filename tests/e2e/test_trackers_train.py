"""A real CPU run with `config init --report-to tensorboard,mlflow` leaves files that each tracker's own library
reads back: TensorBoard's event accumulator finds the loss curve under trackers/tensorboard/<run id>/, and MLflow's
client finds the run (tagged with devtune's run id) and its loss history in trackers/mlflow.db."""

from __future__ import annotations

import pytest

from tests.scale_runs import newest_run, scale_workspace, wait_ended

pytestmark = pytest.mark.e2e


def test_a_run_reports_to_tensorboard_and_mlflow_in_the_workspace(workspace, tiny_model, devtune_cli, lf_env):
    env = {k: lf_env[k] for k in ("HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "XDG_CACHE_HOME")}
    scale_workspace(workspace, tiny_model, devtune_cli, "--report-to", "tensorboard,mlflow", env=env, epochs=4)
    assert "report_to: [tensorboard, mlflow]" in (workspace.configs_dir / "train.yaml").read_text()
    ws = ["-w", str(workspace.root)]
    out = devtune_cli(*ws, "train", "--detach", env=env)
    assert out.returncode == 0, out.stderr
    run = newest_run(devtune_cli, workspace, env)
    record = wait_ended(workspace, run["id"])
    assert record.exit_code == 0, record

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(workspace.root / "trackers" / "tensorboard" / run["id"]))
    events.Reload()
    loss = [e.value for e in events.Scalars("train/loss")]
    assert len(loss) >= 2 and all(v > 0 for v in loss), loss

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{workspace.root / 'trackers' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("devtune")
    (tracked,) = client.search_runs([experiment.experiment_id], filter_string=f"tags.`devtune.run` = '{run['id']}'")
    assert tracked.info.status == "FINISHED"
    history = client.get_metric_history(tracked.info.run_id, "loss")
    assert [m.value for m in history] == pytest.approx(loss)  # the same curve in both trackers
    assert tracked.data.params["learning_rate"]  # transformers logs the run's arguments as parameters
