"""The doctor's version verdicts come from the installed LLaMA-Factory (issue 28): the ranges its packages probe
reads (Requires-Dist with markers and extras, check_dependencies, requirements/*.txt, the cited broken releases),
judged on recorded probe output; the probe itself on a copy of a LLaMA-Factory clone and, in the stack tier, on
this machine's .venv."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from core.doctor.commands import run_command
from core.doctor.evidence import CommandResult, Evidence
from core.doctor.facts import probe_json
from core.doctor.lf_requirements import (
    BROKEN,
    METADATA,
    REQUIREMENTS,
    RUNTIME,
    declared_ranges,
    install_spec,
    mismatch,
    stated_exception,
)
from core.doctor.model import FAIL, OK, WARN
from core.doctor.registry import get_verdict
from core.doctor.scripts import PACKAGES_PROBE, parse_probe_lines

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "doctor"
LF = FIXTURES / "lf_requirements"
MACHINES = FIXTURES / "machines"


def recorded(name: str) -> dict:
    return parse_probe_lines((LF / name).read_text())


def machine(name: str = "mi300x8") -> Evidence:
    return Evidence.load(MACHINES / name)


def with_packages(ev: Evidence, *, versions: dict | None = None, drop: tuple[str, ...] = (),
                  lf: dict | None = None) -> Evidence:
    """The machine's packages probe with some versions changed (or dropped) and another LLaMA-Factory section."""
    data = probe_json(ev, "packages")
    have = {**data["versions"], **(versions or {})}
    for name in drop:
        have.pop(name, None)
    data = {**data, "versions": have, "llamafactory": lf if lf is not None else data["llamafactory"]}
    ev.commands["packages"] = CommandResult(argv=ev.commands["packages"].argv, returncode=0,
                                            stdout=f"\nDEVTUNE-PROBE {json.dumps(data)}\n")
    ev.revision += 1
    return ev


def judge(ev: Evidence, check_id: str):
    ev.revision += 1
    return get_verdict(check_id).check(ev)


def pip_requirements(fix: str) -> dict[str, Requirement]:
    """The requirements a `python -m pip install ...` fix line installs."""
    line = next(l for l in fix.splitlines() if " -m pip install " in l)
    args = shlex.split(line.split(" -m pip install ", 1)[1])
    return {Requirement(a).name: Requirement(a) for a in args if not a.startswith("-")}


def lands_inside(req: Requirement, declared, candidates: list[str]) -> str:
    """The newest of `candidates` pip could install for `req`, checked against every declared range."""
    fitting = [v for v in candidates if req.specifier.contains(v)]
    assert fitting, f"{req} matches none of {candidates}"
    best = max(fitting, key=Version)
    for d in declared:
        if d.package == req.name.replace("-", "_"):
            assert Version(best) in SpecifierSet(d.specifier), f"{best} is outside {d.describe()}"
    return best


TRANSFORMERS_RELEASES = ["4.57.0", "4.57.1", "5.4.0", "5.5.4", "5.6.0", "5.7.0"]


# ---- what the recorded probe output declares -------------------------------------------------------

def test_ranges_read_from_the_wheel_of_0_9_5_say_where_each_comes_from():
    data = recorded("lf-0.9.5-wheel.probe")
    declared = declared_ranges(data["llamafactory"], "3.11.7")
    by = {(d.package, d.kind): d for d in declared}
    assert by[("transformers", METADATA)].specifier == "!=4.52.0,!=4.57.0,<=5.6.0,>=4.55.0"
    assert "Requires-Dist" in by[("transformers", METADATA)].source
    assert by[("transformers", RUNTIME)].source == "LLaMA-Factory 0.9.5 extras/misc.py:97 check_dependencies"
    assert by[("accelerate", RUNTIME)].specifier == ">=1.3.0,<=1.15.0"  # the runtime check is wider ...
    assert by[("accelerate", METADATA)].specifier == "<=1.11.0,>=1.3.0"  # ... than what pip resolves
    deepspeed = by[("deepspeed", REQUIREMENTS)]
    assert deepspeed.specifier == ">=0.10.0,<=0.18.4"
    assert "requirements/deepspeed.txt" in deepspeed.source and "the wheel does not ship it" in deepspeed.source
    assert by[("bitsandbytes", REQUIREMENTS)].specifier == ">=0.39.0"
    broken = by[("transformers", BROKEN)]
    assert broken.specifier == "!=5.6.0" and "#10634" in broken.source and "s_aux" in broken.source
    assert ("numpy", METADATA) not in by  # no range declared: nothing to judge
    assert data["llamafactory"]["v1"] is True


def test_extras_in_the_metadata_apply_to_their_package():
    declared = declared_ranges(recorded("lf-0.9.4-metadata.probe")["llamafactory"], "3.12.3")
    (deepspeed,) = [d for d in declared if d.package == "deepspeed"]
    assert deepspeed.specifier == "<=0.16.9,>=0.10.0" and deepspeed.source.endswith("[deepspeed]")
    assert not [d for d in declared if d.kind == REQUIREMENTS]  # 0.9.4 had no requirements/*.txt
    assert mismatch("deepspeed", {"deepspeed": "0.18.4"}, declared).ranges == (deepspeed,)
    assert mismatch("deepspeed", {"deepspeed": "0.16.9"}, declared) is None


def test_a_marker_that_does_not_hold_here_declares_nothing():
    lf = {"version": "0.9.5", "requires": ['numpy<2; python_version < "3.10"', "scipy>=1.10"], "runtime": []}
    declared = declared_ranges(lf, "3.11.7")
    assert [(d.package, d.specifier) for d in declared if d.kind == METADATA] == [("scipy", ">=1.10")]


def test_install_spec_prefers_the_project_pin_inside_every_range():
    declared = declared_ranges(recorded("lf-0.9.5-wheel.probe")["llamafactory"], "3.11.7")
    assert install_spec("transformers", declared, pins={"transformers": "5.5.4"}) == '"transformers==5.5.4"'
    spec = install_spec("transformers", declared, pins={"transformers": "5.6.0"})  # the pin is the broken one
    req = Requirement(spec.strip('"'))
    assert lands_inside(req, declared, TRANSFORMERS_RELEASES) == "5.5.4"
    assert install_spec("deepspeed", declared, pins={}) == '"deepspeed<=0.18.4,>=0.10.0"'


# ---- the verdicts on recorded machines ------------------------------------------------------------

def test_the_recorded_stack_is_inside_every_range():
    ev = machine()
    check = judge(ev, "libraries.llamafactory_deps")
    assert check.status == OK, check.evidence
    assert "transformers 5.5.4" in check.evidence and "LLaMA-Factory 0.9.5 declares" in check.evidence
    assert judge(ev, "libraries.deepspeed").status == OK
    check = judge(ev, "libraries.llamafactory")
    assert check.status == OK and "generation v0" in check.evidence and "USE_V1=1" in check.evidence


def test_outside_check_dependencies_fails_naming_the_range_and_where():
    ev = with_packages(machine(), versions={"transformers": "5.7.0"})
    check = judge(ev, "libraries.llamafactory_deps")
    assert check.status == FAIL
    assert "transformers 5.7.0 is outside" in check.evidence
    assert ">=4.55.0,<=5.6.0 (LLaMA-Factory 0.9.5 extras/misc.py:97 check_dependencies)" in check.evidence
    declared = declared_ranges(probe_json(ev, "packages")["llamafactory"], "3.12.3")
    assert lands_inside(pip_requirements(check.fix)["transformers"], declared, TRANSFORMERS_RELEASES) == "5.5.4"
    ev.env["DISABLE_VERSION_CHECK"] = "1"
    assert judge(ev, "libraries.llamafactory_deps").status == WARN


def test_a_release_marked_broken_fails_beside_flash_attn_and_warns_without():
    ev = with_packages(machine(), versions={"transformers": "5.6.0"})  # mi300x8 has flash-attn 2.8.3
    check = judge(ev, "libraries.llamafactory_deps")
    assert check.status == FAIL and "transformers 5.6.0 is outside !=5.6.0" in check.evidence
    assert "#10634" in check.evidence and "s_aux" in check.evidence
    req = pip_requirements(check.fix)["transformers"]
    assert not req.specifier.contains("5.6.0")
    ev = with_packages(machine(), versions={"transformers": "5.6.0"}, drop=("flash_attn",))
    assert judge(ev, "libraries.llamafactory_deps").status == WARN


def test_outside_the_metadata_only_warns():
    ev = with_packages(machine(), versions={"accelerate": "1.13.0"})  # check_dependencies allows <=1.15.0
    check = judge(ev, "libraries.llamafactory_deps")
    assert check.status == WARN
    assert "accelerate 1.13.0 is outside <=1.11.0,>=1.3.0 (LLaMA-Factory 0.9.5 package metadata" in check.evidence
    assert pip_requirements(check.fix)["accelerate"].specifier.contains("1.11.0")


def test_a_library_check_dependencies_needs_but_missing_fails():
    ev = with_packages(machine(), drop=("peft",))
    check = judge(ev, "libraries.llamafactory_deps")
    assert check.status == FAIL and "peft is not installed; LLaMA-Factory needs >=0.18.0" in check.evidence
    assert "peft" in pip_requirements(check.fix)


def test_a_library_only_the_metadata_names_may_be_absent():
    ev = with_packages(machine(), drop=("torchvision",))  # llamafactory is installed --no-deps
    assert judge(ev, "libraries.llamafactory_deps").status == OK


def test_deepspeed_outside_requirements_txt_warns_with_its_source():
    ev = with_packages(machine(), versions={"deepspeed": "0.19.7"})
    check = judge(ev, "libraries.deepspeed")
    assert check.status == WARN
    assert "deepspeed 0.19.7 is outside >=0.10.0,<=0.18.4" in check.evidence
    assert "requirements/deepspeed.txt" in check.evidence
    req = pip_requirements(check.fix)["deepspeed"]
    assert req.specifier.contains("0.19.8")  # devtune's pin: the stated exception below


def test_devtunes_stated_deepspeed_exception_is_said_as_such():
    from core.doctor.lf_requirements import STATED_EXCEPTIONS

    ev = with_packages(machine(), versions={"deepspeed": "0.19.8"})
    check = judge(ev, "libraries.deepspeed")
    assert check.status == OK, check.evidence
    assert "<=0.18.4 on purpose" in check.evidence and "Outside" in check.evidence and "ds_grads_remaining" in check.evidence
    assert "tests/e2e/test_train_zero3.py" in check.evidence
    (exc,) = [e for e in STATED_EXCEPTIONS if e.package == "deepspeed"]
    assert (ROOT / exc.proof).is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"deepspeed=={exc.version}"' in pyproject and "ds_grads_remaining" in pyproject
    assert "ds_grads_remaining" in (ROOT / "README.md").read_text()
    # a runtime range (LLaMA-Factory refuses to start outside it) can never be left on purpose
    runtime = [d for d in declared_ranges({"runtime": [{"requirement": "deepspeed<=0.18.4", "where": "x:1 f"}]})
               if d.package == "deepspeed"]
    assert runtime and stated_exception("deepspeed", exc.version, tuple(runtime)) is None


def test_bitsandbytes_below_lf_range_fails_on_nvidia():
    ev = with_packages(machine("nvidia-h100x8"), versions={"bitsandbytes": "0.38.1"})
    check = judge(ev, "libraries.bitsandbytes")
    assert check.status == FAIL and "bitsandbytes 0.38.1 is outside >=0.39.0" in check.evidence
    assert pip_requirements(check.fix)["bitsandbytes"].specifier.contains("0.39.0")


def test_lf_0_9_4_judged_by_its_own_ranges():
    data = recorded("lf-0.9.4-metadata.probe")
    ev = with_packages(machine(), versions={**data["versions"], "llamafactory": "0.9.4"}, lf=data["llamafactory"])
    check = judge(ev, "libraries.llamafactory_deps")
    assert check.status == OK, check.evidence  # transformers 4.57.1 is inside 0.9.4's <=4.57.1
    assert judge(ev, "libraries.deepspeed").status == OK  # 0.16.9, the top of its deepspeed extra
    ev = with_packages(ev, versions={"transformers": "5.5.4"})
    check = judge(ev, "libraries.llamafactory_deps")
    assert check.status == FAIL and ">=4.51.0,<=4.57.1 (LLaMA-Factory 0.9.4 extras/misc.py:97" in check.evidence


def test_use_v1_in_the_environment_warns():
    data = probe_json(machine(), "packages")["llamafactory"]
    ev = with_packages(machine(), lf={**data, "USE_V1": "1"})
    check = judge(ev, "libraries.llamafactory")
    assert check.status == WARN and "USE_V1=1 is set" in check.evidence and check.fix == "unset USE_V1"
    ev = with_packages(machine(), lf={**data, "USE_V1": "0"})
    assert judge(ev, "libraries.llamafactory").status == OK


def test_a_recording_without_the_declared_ranges_says_so():
    ev = machine()
    data = probe_json(ev, "packages")
    data.pop("llamafactory")
    ev.commands["packages"] = CommandResult(argv=["python"], returncode=0,
                                            stdout=f"\nDEVTUNE-PROBE {json.dumps(data)}\n")
    check = judge(ev, "libraries.llamafactory_deps")
    assert check.status == WARN and "did not report" in check.evidence and check.fix == "devtune doctor"


# ---- the probe itself ---------------------------------------------------------------------------

def test_the_probe_reads_a_clone_s_requirements_and_runtime_checks(tmp_path):
    """The real packages probe on a copy of LLaMA-Factory main installed editable: a dist-info whose
    direct_url.json points at the clone, the clone's src/ on the path (python -S: nothing else is there)."""
    clone = tmp_path / "LLaMA-Factory"
    shutil.copytree(LF / "lf-main", clone)
    dist = tmp_path / "site" / "llamafactory-0.9.6.dev0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text((clone / "METADATA").read_text())
    (dist / "direct_url.json").write_text(json.dumps({"url": clone.as_uri(), "dir_info": {"editable": True}}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(clone / "src")]), "USE_V1": "1"}
    result = run_command([sys.executable, "-S", "-c", PACKAGES_PROBE], timeout=60, env=env)
    lf = parse_probe_lines(result.stdout)["llamafactory"]
    assert lf["version"] == "0.9.6.dev0" and lf["v1"] is True and lf["USE_V1"] == "1"
    assert lf["requirements_dir"] == str(clone / "requirements")
    assert lf["requirements_txt"]["deepspeed.txt"] == ["deepspeed>=0.10.0,<=0.18.4"]
    runtime = {r["requirement"]: r["where"] for r in lf["runtime"]}
    line = next(i for i, l in enumerate((clone / "src/llamafactory/extras/misc.py").read_text().splitlines(), 1)
                if 'check_version("transformers' in l and "def " not in l)
    assert runtime["transformers>=4.55.0,<=5.8.0,!=4.57.0,!=5.6.0"] == f"extras/misc.py:{line} check_dependencies"
    declared = declared_ranges(lf)
    (deepspeed,) = [d for d in declared if d.package == "deepspeed"]
    assert deepspeed.source == f"LLaMA-Factory 0.9.6.dev0 {clone / 'requirements'}/deepspeed.txt"
    assert [d.specifier for d in declared if d.package == "vllm"] == [">=0.4.3,<=0.11.0"]


@pytest.mark.usefixtures("uses_llamafactory")
def test_the_real_probe_on_this_venv_reads_lf_and_the_installed_stack_passes():
    root = Path(__file__).resolve().parents[2]
    python = root / ".venv" / "bin" / "python"
    out = subprocess.run([str(python), "-c", PACKAGES_PROBE], capture_output=True, text=True, timeout=120).stdout
    data = parse_probe_lines(out)
    lf = data["llamafactory"]
    from importlib import metadata

    assert lf["version"] == metadata.version("llamafactory")
    assert sorted(lf["requires"]) == sorted(metadata.requires("llamafactory"))
    misc = Path(lf["location"], "extras", "misc.py").read_text().splitlines()
    for check in lf["runtime"]:  # each runtime range is the line LLaMA-Factory's check_dependencies holds
        line = int(re.search(r":(\d+) ", check["where"]).group(1))
        assert f'check_version("{check["requirement"]}")' in misc[line - 1]
    assert {Requirement(c["requirement"]).name for c in lf["runtime"]} >= {"transformers", "peft", "trl"}
    ev = Evidence()
    ev.commands["packages"] = CommandResult(argv=[str(python)], returncode=0, stdout=out)
    ev.host["train_python"] = str(python)
    for check_id in ("libraries.llamafactory", "libraries.llamafactory_deps"):
        check = get_verdict(check_id).check(ev)
        assert check.status == OK, f"{check_id}: {check.evidence}"
    have = data["versions"]
    declared = declared_ranges(lf, data["python"])
    outside = mismatch("deepspeed", have, declared)  # inside its ranges, or the exception devtune states
    assert outside is None or stated_exception("deepspeed", have["deepspeed"], outside.ranges), outside.describe()
