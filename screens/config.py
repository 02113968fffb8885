"""Step 3, Config: a form in sections (model, method, data, training, hardware, output) with inline
validation, the memory-fit gauge, the findings, and a live preview of the YAML, the DeepSpeed JSON
and the launch command side by side. Saving writes configs/ through core.config.files."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.timer import Timer

from core.config.form import FIELDS, form_values, placeholder, ruled_values, spec_from_form
from core.config.gpu_catalog import CATALOG, GIB
from core.i18n import _
from core.config.templates import BUILTIN
from core.config.presets import PRESETS
from core.config.spec import ATTENTIONS, PRECISIONS, SCHEDULERS, TrainSpec
from screens.base import Job, StepScreen, UserError, step_binding
from tui.widgets.field_form import FieldForm, FormRow
from tui.widgets.files_preview import FilesPreview
from tui.widgets.findings_view import FindingsView
from tui.widgets.memory_gauge import GaugeData, MemoryGauge

PREVIEW_DELAY = 0.2


def _labels() -> dict[str, str]:
    return {
        "preset": _("start from preset"), "model_name_or_path": _("model (folder or hub id)"),
        "template": _("chat template"), "finetuning_type": _("method"), "quantization_bit": _("QLoRA bits"),
        "stage": _("training stage"), "pref_loss": _("preference loss (dpo)"), "pref_beta": _("preference beta"),
        "adapter_name_or_path": _("start from adapter"),
        "lora_rank": _("LoRA rank"), "lora_alpha": _("LoRA alpha"), "lora_dropout": _("LoRA dropout"),
        "lora_target": _("LoRA targets"), "additional_target": _("also train (full)"),
        "dataset": _("dataset(s)"), "cutoff_len": _("cutoff_len (tokens)"), "val_size": _("validation split"),
        "eval_dataset": _("held-out set (eval loss)"), "eval_steps": _("eval every (steps)"),
        "max_samples": _("max samples"), "per_device_train_batch_size": _("batch per device"),
        "gradient_accumulation_steps": _("gradient accumulation"), "learning_rate": _("learning rate"),
        "num_train_epochs": _("epochs"), "max_steps": _("max steps (overrides)"),
        "lr_scheduler_type": _("scheduler"), "warmup_ratio": _("warmup ratio"), "precision": _("precision"),
        "flash_attn": _("attention"), "disable_gradient_checkpointing": _("no grad. checkpointing"),
        "logging_steps": _("logging steps"), "save_steps": _("save steps"), "launch.device": _("device"),
        "launch.gpu_model": _("target GPU"), "launch.gpus_per_node": _("GPUs per node"),
        "launch.nnodes": _("nodes"), "launch.master_addr": _("node 0 address"),
        "launch.master_port": _("node 0 port"), "launch.launcher": _("launcher"),
        "launch.partition": _("Slurm partition"), "launch.account": _("Slurm account"),
        "launch.time_limit": _("Slurm time limit"), "launch.sbatch_extra": _("extra #SBATCH (a; b)"),
        "launch.requeue": _("Slurm: requeue and resume"), "zero_stage": _("DeepSpeed ZeRO"), "offload": _("CPU offload"),
        "output_dir": _("output_dir (saves/...)"), "overwrite_output_dir": _("start over (no resume)"),
        "resume_from_checkpoint": _("resume from checkpoint"), "report_to": _("trackers (report_to)"),
    }


def _sections() -> dict[str, str]:
    return {"model": _("Model"), "method": _("Method"), "data": _("Data"), "train": _("Training"),
            "hardware": _("Hardware and launch"), "output": _("Output")}


def _options(key: str) -> list[tuple[str, str]]:
    if key == "template":
        return [(n, n) for n in BUILTIN.names]
    if key == "finetuning_type":
        return [(_("LoRA"), "lora"), (_("QLoRA (4-bit, bitsandbytes)"), "qlora"), (_("full"), "full"),
                (_("freeze (last layers)"), "freeze")]
    if key == "quantization_bit":
        return [("4", "4"), ("8", "8")]
    if key == "stage":
        return [(_("sft (supervised)"), "sft"), (_("pt (pre-training text)"), "pt"),
                (_("dpo (preference pairs)"), "dpo"), (_("kto (tagged answers)"), "kto")]
    if key == "pref_loss":
        return [(_("sigmoid (DPO)"), "sigmoid"), (_("orpo (no reference)"), "orpo"),
                (_("simpo (no reference)"), "simpo")]
    if key == "lr_scheduler_type":
        return [(s, s) for s in SCHEDULERS]
    if key == "precision":
        return [(p, p) for p in PRECISIONS]
    if key == "flash_attn":
        return [(a, a) for a in ATTENTIONS]
    if key == "launch.device":
        return [(_("GPU"), "gpu"), (_("CPU (tiny model)"), "cpu")]
    if key == "launch.launcher":
        return [(_("this machine / by hand"), "local"), (_("Slurm (sbatch)"), "slurm")]
    if key == "launch.gpu_model":
        return [(f"{g.name} ({g.memory_bytes / GIB:.0f} GiB)", g.id) for g in CATALOG]
    if key == "zero_stage":
        return [(_("off"), "none"), ("ZeRO-2", "2"), ("ZeRO-3", "3"), ("ZeRO-0", "0")]
    return []


def form_rows() -> list[FormRow]:
    labels, sections = _labels(), _sections()
    rows = [FormRow("preset", labels["preset"], "choice", sections["model"],
                    [(f"{n}: {p.description}", n) for n, p in PRESETS.items()], _("keep the current values"))]
    for f in FIELDS:
        rows.append(FormRow(f.key, labels.get(f.key, f.key), f.kind, sections[f.section], _options(f.key),
                            placeholder(f.key)))
    return rows


class ConfigScreen(StepScreen):
    STEP_ID = "config"
    BINDINGS = [
        step_binding("config", "run", "save", _("Save config"),
                     tooltip=_("write configs/train.yaml (and the DeepSpeed JSON) from the form")),
        step_binding("config", "save", "save", _("Save config"), show=False),
        step_binding("config", "check", "check", _("Check with LLaMA-Factory"),
                     tooltip=_("ask LLaMA-Factory's own argument parser about this config (a few seconds)")),
        step_binding("config", "refresh", "reload", _("Reload the config"),
                     tooltip=_("read configs/train.yaml again, dropping the form's changes")),
    ]

    # what the screen shows follows this: (core.config.files preview, extra findings) of the current spec
    shown: var[tuple | None] = var(None)

    @dataclass
    class Loaded:  # the form's start: the config (or a preset), where it lives, and what the form needs
        spec: TrainSpec
        path: str
        found: object  # the GPUs found (core.config.files.found_gpus)
        registered: list[str]
        note: str | None
        rows: int | None  # training rows (the eval set's size rules)

    @dataclass
    class Wired:  # the spec with the eval set its datasets have, and their training rows
        spec: TrainSpec
        rows: int | None

    @dataclass
    class Saved:
        saved: object  # core.config.files.save_config's outcome
        shown: object  # the preview of what was saved

    @dataclass
    class Checked:
        shown: object  # the preview LLaMA-Factory's parser checked
        findings: list  # its findings
    CSS_PATH = "../tui/styles/config.tcss"

    @property
    def INTRO(self) -> str:  # noqa: N802 - StepScreen's attribute, translated when shown
        return _("Choose how to train. The form writes LLaMA-Factory's own YAML, the DeepSpeed JSON and the "
                 "command; the gauge says whether it fits the GPU. F5 saves, F6 asks LLaMA-Factory itself.")

    def __init__(self) -> None:
        super().__init__()
        self.spec: TrainSpec | None = None
        self.config_path = "configs/train.yaml"
        self.catalog = BUILTIN
        self.found: list[tuple[str, int]] = []
        self.rows: int | None = None  # the datasets' training rows: the eval interval's rule needs them
        self._timer: Timer | None = None
        self._form_errors: dict[str, str] = {}
        self._force_save = False

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="config-columns"):
            with Vertical(id="config-left"):
                yield FieldForm(form_rows(), id="config-form")
            with Vertical(id="config-right"):
                gauge = MemoryGauge(id="config-gauge")
                gauge.border_title = _("memory fit")
                yield gauge
                findings = FindingsView(id="config-findings")
                findings.border_title = _("checks")
                yield findings
                yield FilesPreview([("preview-yaml", "train.yaml"), ("preview-deepspeed", _("DeepSpeed JSON")),
                                    ("preview-command", _("command"))], id="config-preview")

    def on_mount(self) -> None:
        self.load_config()
        self.run_background(self._read_templates, self.ws, group="config-templates",
                            description=_("reading LLaMA-Factory's template list"), done=self._templates_loaded)

    # loading
    def load_config(self) -> None:
        self.run_background(self._read_config, self.ws, self.state.dataset_name, group="config-load",
                            description=_("reading the training config"), done=self._loaded)

    @staticmethod
    def _read_config(job: Job, ws, dataset_name: str | None) -> Loaded:
        from core.config.files import ConfigMissing, current_config_path, found_gpus, load_config, registered_datasets
        from core.config.presets import preset_spec
        from core.config.starting_preset import starting_preset
        from core.config.yaml_in import ImportProblem

        path = current_config_path(ws)
        found = found_gpus(ws)
        registered = registered_datasets(ws)
        note = None
        try:
            loaded = load_config(ws, path)
            spec = loaded.spec
            if loaded.edited_by_hand:
                note = _("{path} was edited by hand: the form shows the file", path=path)
        except (ConfigMissing, ImportProblem) as exc:
            name = starting_preset(ws)
            spec = preset_spec(name, [dataset_name] if dataset_name else None)
            note = _("no config saved yet: starting from the {name} preset", name=name)
            if isinstance(exc, ImportProblem):
                note = _("{path} cannot be read ({error}): the form starts from the {name} preset; saving "
                         "replaces the file only when asked twice", path=path, error=str(exc), name=name)
        wired = ConfigScreen._wire_eval(job, ws, spec)
        if wired.spec.eval_dataset != spec.eval_dataset and note is None:
            note = _("held-out set {names} found: the eval loss is added to the form; save (F5) to train with it",
                     names=", ".join(wired.spec.eval_dataset))
        return ConfigScreen.Loaded(wired.spec, path, found, registered, note, wired.rows)

    @staticmethod
    def _wire_eval(job: Job, ws, spec: TrainSpec, old: TrainSpec | None = None) -> Wired:
        from core.config.eval_loss import training_rows, wire_eval_loss

        return ConfigScreen.Wired(wire_eval_loss(ws, spec, old), training_rows(ws, spec))

    def _loaded(self, loaded: Loaded) -> None:
        spec, found, registered, note, rows = loaded.spec, loaded.found, loaded.registered, loaded.note, loaded.rows
        self.spec, self.config_path, self.found, self.rows = spec, loaded.path, found, rows
        form = self.query_one(FieldForm)
        typed = form.edited - {"preset"}  # typed while the config was read: kept, on top of the loaded spec
        form.set_values({k: v for k, v in {**form_values(spec), "preset": ""}.items() if k not in typed})
        form.set_placeholder("dataset", _("registered: {names}", names=", ".join(registered)) if registered
                             else _("none registered yet (Data step)"))
        if found:
            form.query_one("#field-launch-gpu-model").disabled = True
        self._form_errors = {}
        form.set_errors({})
        if typed:
            new, errors = spec_from_form(spec, form.values(), rows)
            self.spec = new or spec
            self._form_errors = errors
            form.set_errors(errors)
        if note:
            self.notify(note, timeout=6)
        self.request_preview()

    @staticmethod
    def _read_templates(job: Job, ws):
        from core.config.templates import load_catalog

        return load_catalog(ws.cache_dir / "lf_templates.json")

    def _templates_loaded(self, catalog) -> None:
        self.catalog = catalog
        self.query_one(FieldForm).set_options("template", [(n, n) for n in catalog.names])
        self.request_preview()

    # editing
    @on(FieldForm.Changed)
    def _form_changed(self, event: FieldForm.Changed) -> None:
        if self.spec is None:
            return
        form = self.query_one(FieldForm)
        if event.key == "preset":
            name = form.values().get("preset")
            if name:
                from core.config.presets import preset_spec

                self.spec = preset_spec(str(name), self.spec.dataset or None)
                form.set_values({**form_values(self.spec)})
                self.request_preview()
                preset = self.spec
                self.run_background(self._wire_eval, self.ws, preset, group="config-eval",
                                    description=_("looking for the datasets' held-out sets"),
                                    done=lambda wired: self._eval_wired(preset, wired))
            return
        old = self.spec
        values = form.values()
        new, errors = spec_from_form(self.spec, values, self.rows)
        self._form_errors = errors
        form.set_errors(errors)
        if new is not None:
            self.spec = new
            form.set_values(ruled_values(old, new, values))  # what the rules changed (core.config.field_rules)
            self._force_save = False
            self.request_preview()
            if event.key == "dataset" and new.dataset != old.dataset:
                self.run_background(self._wire_eval, self.ws, new, old, group="config-eval",
                                    description=_("looking for the datasets' held-out sets"),
                                    done=lambda wired: self._eval_wired(new, wired))
            if event.key == "model_name_or_path" and new.model_name_or_path != old.model_name_or_path:
                self.run_background(self._suggest_template, self.ws, self.catalog, old.model_name_or_path,
                                    new.model_name_or_path, new.template, group="config-template",
                                    description=_("looking up the model's template"),
                                    done=lambda template: self._set_template(new.model_name_or_path, template))

    def _eval_wired(self, asked: TrainSpec, result: Wired) -> None:
        """The eval set follows the datasets (unless the form changed again meanwhile)."""
        wired, rows = result.spec, result.rows
        if self.spec is not asked:
            return
        self.rows = rows
        if wired.model_dump() == asked.model_dump():
            return
        self.spec = wired
        self.query_one(FieldForm).set_values({k: v for k, v in form_values(wired).items()
                                              if k in ("eval_dataset", "eval_steps")})
        self.request_preview()

    @staticmethod
    def _suggest_template(job: Job, ws, catalog, old_model: str, new_model: str, current: str | None) -> str | None:
        """Like LlamaBoard: choosing a model fills in its template, unless the person chose another one."""
        from core.config.templates import default_template

        before = default_template(old_model, catalog, ws.root)
        after = default_template(new_model, catalog, ws.root)
        return after if after and after != current and current in (None, before) else None

    def _set_template(self, model: str, template: str | None) -> None:
        if template is None or self.spec is None or self.spec.model_name_or_path != model:
            return
        self.query_one(FieldForm).set_values({"template": template})
        self.spec = self.spec.model_copy(update={"template": template})
        self.notify(_("template set to {name}, the one {model} is trained with", name=template, model=model),
                    timeout=5)
        self.request_preview()

    def request_preview(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(PREVIEW_DELAY, self._start_preview)

    def _start_preview(self) -> None:
        if self.spec is not None:
            self.run_background(self._preview, self.ws, self.spec, self.config_path, self.found, self.catalog,
                                group="config-preview", description=_("computing the preview and memory fit"),
                                done=lambda shown: self._adopt(shown, None))

    @staticmethod
    def _preview(job: Job, ws, spec: TrainSpec, config_path: str, found, catalog):
        from core.config.files import preview

        return preview(ws, spec, config_path, found=found, catalog=catalog)

    def _adopt(self, shown, extra_findings) -> None:
        if shown.spec is self.spec:  # else an older preview: a newer one is on its way
            self.shown = (shown, list(extra_findings or []))

    def watch_shown(self, view: tuple | None) -> None:
        from core.config.memfit import gib, verdict_label

        if view is None:
            return
        shown, extra_findings = view
        findings = list(shown.findings) + extra_findings
        order = {"error": 0, "warning": 1, "info": 2}
        findings.sort(key=lambda f: order[f.severity])
        self.query_one(FindingsView).show([(f.severity, f.message, f.fix) for f in findings], empty=_("no findings"))
        inline = {f.field: f.message for f in findings if f.severity == "error" and f.field}
        self.query_one(FieldForm).set_errors({**inline, **self._form_errors})
        fit = shown.fit
        gauge = self.query_one(MemoryGauge)
        if fit is None:
            gauge.show(GaugeData("unknown", _("memory fit unknown: the model's shape could not be read"), [], None))
        else:
            capacity = fit.capacity_bytes
            headline = (_("{verdict}: {need} of {have} per device ({device})", verdict=verdict_label(fit.verdict),
                          need=gib(fit.per_device_bytes), have=gib(capacity), device=fit.device) if capacity else
                        _("{need} per device; choose a target GPU", need=gib(fit.per_device_bytes)))
            notes = list(fit.notes)
            if fit.host_bytes:
                notes.append(_("CPU RAM for offload: {need} per node", need=gib(fit.host_bytes)))
            gauge.show(GaugeData(fit.verdict, headline, [(p.label, p.bytes) for p in fit.parts], capacity,
                                 [a.text + f" ({gib(a.estimate.per_device_bytes)})" for a in shown.advice], notes))
        files = self.query_one(FilesPreview)
        files.show("preview-yaml", shown.yaml)
        files.show("preview-deepspeed", shown.deepspeed_json or (
            _("# {path} (your own file, not rewritten)", path=shown.deepspeed_path) if shown.deepspeed_path
            else _("# DeepSpeed is off")))
        files.show("preview-command", "\n".join(
            [_("# run from the workspace root: cd {root}", root=self.ws.root)]
            + [(_("# node {rank}", rank=c.node_rank) + "\n" if len(shown.commands) > 1 else "") + c.text
               for c in shown.commands]))

    # actions
    def action_save(self) -> None:
        if self.spec is None or self._form_errors:
            self.notify(_("fix the marked fields first"), severity="warning")
            return
        self.run_background(self._save, self.ws, self.spec, self.config_path, self._force_save, self.found,
                            self.catalog, group="config-save", description=_("saving the training config"),
                            done=self._saved, failed=lambda _e: setattr(self, "_force_save", True))

    @staticmethod
    def _save(job: Job, ws, spec: TrainSpec, config_path: str, force: bool, found, catalog):
        from core.config.files import preview, save_config
        from core.files.atomic import FileExistsRefused

        try:
            saved = save_config(ws, spec, config_path, force=force)
        except FileExistsRefused as exc:
            raise UserError(_("{path} was not written by devtune (or was edited since): press F5 again to "
                              "replace it", path=ws.rel(exc.path))) from exc
        return ConfigScreen.Saved(saved, preview(ws, spec, config_path, found=found, catalog=catalog))

    def _saved(self, result) -> None:
        from core.config.files import config_saved

        saved, shown = result.saved, result.shown
        self.clear_error()
        self._force_save = False
        self.app.apply_change(config_saved(self.ws.rel(self.ws.abs(saved.yaml_path)), shown))
        written = ", ".join(saved.written) or _("nothing changed")
        self.notify(_("saved: {files}", files=written), timeout=5)

    def action_check(self) -> None:
        if self.spec is not None and not self._form_errors:
            self.notify(_("asking LLaMA-Factory's own parser (a few seconds)..."), timeout=4)
            self.run_background(self._check, self.ws, self.spec, self.config_path, self.found, self.catalog,
                                group="config-check", description=_("checking with LLaMA-Factory"),
                                done=lambda checked: self._adopt(checked.shown, checked.findings))

    @staticmethod
    def _check(job: Job, ws, spec: TrainSpec, config_path: str, found, catalog):
        from core.config.full_check import check_config, lf_findings

        checked = check_config(ws, spec, config_path, found=found, catalog=catalog)
        return ConfigScreen.Checked(checked.preview, lf_findings(spec, checked.llamafactory, checked.preview.targets))

    def action_reload(self) -> None:
        self.clear_error()
        self.query_one(FieldForm).edited.clear()  # ^r drops the form's changes
        self.load_config()
