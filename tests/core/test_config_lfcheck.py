"""The installed LLaMA-Factory's own parser and lists, used in subprocesses (each takes seconds)."""

import json
import os
import subprocess
import sys

from pathlib import Path

import pytest

from core.config.full_check import check_config, lf_findings
from core.config.lf_argcheck import check_with_llamafactory
from core.config.templates import (BUILTIN_TEMPLATES, BUILTIN_VERSION, default_template, installed_llamafactory_version,
                               load_catalog)
from core.config.yaml_out import lf_args
from core.config.presets import preset_spec
from core.config.spec import LF_DEFAULTS
from tests.core.config_workspace import ROOT, fake_model, register_dataset

pytestmark = [pytest.mark.skipif(installed_llamafactory_version() is None, reason="llamafactory is not installed"),
              pytest.mark.usefixtures("uses_llamafactory")]


def test_devtune_knows_llamafactorys_defaults():
    code = (
        "import dataclasses, json\nfrom llamafactory.hparams.parser import _TRAIN_ARGS\nout = {}\n"
        "for cls in _TRAIN_ARGS:\n    for f in dataclasses.fields(cls):\n"
        "        if f.name not in out and f.default is not dataclasses.MISSING:\n"
        "            d = f.default\n            out[f.name] = d.value if hasattr(d, 'value') else d\n"
        "print('DEFAULTS ' + json.dumps(out, default=str))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("DEFAULTS "))
    installed = json.loads(line[9:])
    different = {k: (v, installed.get(k, "<missing>")) for k, v in LF_DEFAULTS.items()
                 if installed.get(k, "<missing>") != v}
    assert different == {}


def test_the_cpu_demo_is_accepted_and_mistakes_are_reported(workspace):
    ok = check_with_llamafactory(lf_args(preset_spec("cpu-demo")), cwd=workspace.root)
    assert ok.ran and ok.ok and ok.error is None and ok.version == installed_llamafactory_version()
    bad_args = {**lf_args(preset_spec("cpu-demo")), "bf16": True, "lora_rnak": 4}
    bad = check_with_llamafactory(bad_args, cwd=workspace.root)
    assert bad.ran and not bad.ok
    assert bad.unknown_keys == ["lora_rnak"] and "lora_rnak" in bad.error
    assert "bf16" in bad.hardware  # this machine has no bf16; the rest was still checked


def test_zero3_qlora_goes_through_llamafactorys_distributed_checks(workspace):
    fake_model(workspace)
    register_dataset(workspace)
    spec = preset_spec("qlora-70b").model_copy(update={"zero_stage": 3})
    checked = check_config(workspace, spec)
    lf = checked.llamafactory
    assert lf.ran and lf.ok, lf
    codes = {f.code: f.severity for f in lf_findings(spec, lf, checked.preview.targets)}
    assert codes["lf.ok"] == "info"
    assert codes["lf.bf16"] == "warning"  # no GPU here: the target must have bf16, which cannot be checked here
    assert any("upcast_layernorm" in f.message for f in checked.findings if f.code == "lf.warning")


def test_template_list_and_model_defaults_come_from_the_installed_llamafactory(tmp_path):
    cache = tmp_path / "lf_templates.json"
    catalog = load_catalog(cache)
    assert catalog.source == "llamafactory" and cache.exists()
    assert {"llama3", "qwen3_nothink", "default", "empty"} <= set(catalog.names)
    if catalog.version == BUILTIN_VERSION:
        assert set(catalog.names) == set(BUILTIN_TEMPLATES)  # the built-in list is this version's
    assert default_template("meta-llama/Meta-Llama-3-8B-Instruct", catalog) == "llama3"
    assert default_template("Qwen/Qwen3-4B-Instruct-2507", catalog) == "qwen3_nothink"
    assert load_catalog(cache).names == catalog.names  # from the cache this time
    # the screens' tests outside the stack tier read this recording instead (tests/conftest.py): it must
    # still be what the installed LLaMA-Factory prints, else record it again from `cache`
    import json

    recorded = json.loads((Path(__file__).parents[1] / "fixtures" / "config" / "lf_templates.json").read_text())
    assert (recorded["version"], recorded["names"], recorded["hub"]) == \
        (catalog.version, list(catalog.names), catalog.hub_defaults), "record tests/fixtures/config/lf_templates.json again"
