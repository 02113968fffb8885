"""env_restored: what a block sets or removes is put back, also when the block raises."""

import os

import pytest

from core.processes.environment import env_restored


def test_env_restored_puts_back_set_and_absent_variables(monkeypatch):
    monkeypatch.setenv("DEVTUNE_T_SET", "before")
    monkeypatch.delenv("DEVTUNE_T_ABSENT", raising=False)
    with pytest.raises(RuntimeError):
        with env_restored("DEVTUNE_T_SET", "DEVTUNE_T_ABSENT"):
            os.environ["DEVTUNE_T_SET"] = "during"
            os.environ["DEVTUNE_T_ABSENT"] = "during"
            raise RuntimeError("the block fails")
    assert os.environ["DEVTUNE_T_SET"] == "before"
    assert "DEVTUNE_T_ABSENT" not in os.environ
    with env_restored("DEVTUNE_T_SET"):
        del os.environ["DEVTUNE_T_SET"]
    assert os.environ["DEVTUNE_T_SET"] == "before"
