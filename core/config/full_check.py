"""The full check of a training config: devtune's rules (core.config.files.preview) and then the installed
LLaMA-Factory's own argument parser in a subprocess (core.config.lf_argcheck), as findings."""

from __future__ import annotations

from dataclasses import dataclass

from core.config.files import DEFAULT_CONFIG, ConfigPreview, preview
from core.config.gpu_catalog import GpuTarget
from core.config.rule_context import ConfigFinding
from core.config.spec import TrainSpec
from core.config.templates import TemplateCatalog
from core.config.yaml_out import lf_args
from core.i18n import _
from core.workspace.layout import Workspace


@dataclass
class ConfigCheck:
    preview: ConfigPreview
    llamafactory: object | None  # core.config.lf_argcheck.LfCheck

    @property
    def findings(self) -> list[ConfigFinding]:
        return self.preview.findings + lf_findings(self.preview.spec, self.llamafactory, self.preview.targets)

    @property
    def errors(self) -> list[ConfigFinding]:
        return [f for f in self.findings if f.severity == "error"]


def check_config(ws: Workspace, spec: TrainSpec, path: str = DEFAULT_CONFIG, *,
                 found: list[tuple[str, int]] | None = None, catalog: TemplateCatalog | None = None,
                 with_llamafactory: bool = True) -> ConfigCheck:
    """devtune's rules, then LLaMA-Factory's own argument parser in a subprocess (seconds)."""
    from core.config.lf_argcheck import check_with_llamafactory

    shown = preview(ws, spec, path, found=found, catalog=catalog)
    lf = None
    if with_llamafactory:
        lf = check_with_llamafactory(lf_args(spec), cwd=ws.root, distributed=spec.zero_stage is not None
                                     or spec.launch.distributed, deepspeed_json=shown.deepspeed_json)
    return ConfigCheck(shown, lf)


def lf_findings(spec: TrainSpec, lf, targets: list[GpuTarget]) -> list[ConfigFinding]:
    if lf is None:
        return []
    if not lf.ran:
        return [ConfigFinding("info", "lf.skipped", _("LLaMA-Factory's own check did not run: {reason}", reason=lf.reason),
                        source="llamafactory")]
    out: list[ConfigFinding] = []
    if lf.hardware:
        here = spec.launch.device == "cpu" or any(t.source == "doctor" for t in targets)
        out.append(ConfigFinding("error" if here else "warning", "lf.bf16", _("this machine has no bf16: {message}",
                                                                       message=lf.hardware) if here else
                           _("bf16 cannot be checked on this machine (no GPU here); the target GPU must support it"),
                           "precision", source="llamafactory"))
    if lf.error:
        out.append(ConfigFinding("error", "lf.error", _("LLaMA-Factory {version} refuses the arguments: {message}",
                                                  version=lf.version, message=lf.error), None, source="llamafactory"))
    elif lf.ok:
        out.append(ConfigFinding("info", "lf.ok", _("LLaMA-Factory {version} accepts the arguments", version=lf.version),
                           source="llamafactory"))
    out += [ConfigFinding("info", "lf.warning", _("LLaMA-Factory: {message}", message=w), source="llamafactory")
            for w in lf.warnings]
    return out
