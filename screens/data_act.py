"""The Data step's fix / convert / register: each asked for in the Fix & register tab (tui.widgets.data_actions),
previewed before anything is written, run through core.data.actions with the open file's chat-export roles (the
person's choice in the speakers' form, screens/data_opened.py), a replacement confirmed first."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Button, TabbedContent

from core.i18n import _
from screens.base import Job
from screens.data_opened import OpenedNote
from tui.widgets.data_actions import DataActions
from tui.widgets.data_file_tree import DataFileTree


class DataActing:
    """Mixed into the DataScreen: it has `path`, `ws`, `roles` and `open_file`."""

    def action_fix_preview(self) -> None:
        self._request("fix")

    def action_convert_preview(self) -> None:
        self._request("convert")

    def action_register_preview(self) -> None:
        self._request("register")

    def _request(self, action: str) -> None:
        """Show the action's form and preview its result. The focus moves into the form first: otherwise
        hiding the focused row table would hand the focus (and with it the tab) back to the Rows tab."""
        self.query_one("#data-tabs", TabbedContent).active = "tab-actions"
        actions = self.query_one(DataActions)
        actions.query_one(f"#{action}-preview", Button).focus()
        actions.request(action, write=False)

    def on_data_actions_requested(self, event: DataActions.Requested) -> None:
        path = self.path
        if path is None:
            self.app.notify(_("open a file first (o)"), timeout=3)
            return
        if event.write and event.action == "fix" and event.yes:
            from tui.widgets.confirm import ConfirmScreen

            from core.data.fix import confirmed_fixes

            question = _("Also apply the fixes that need a confirmation ({fixes}) and write {out}?",
                         fixes=confirmed_fixes(), out=event.output)
            self.app.push_screen(ConfirmScreen(question), lambda ok: self._act(event, path) if ok else None)
            return
        self._act(event, path)

    def _act(self, req: DataActions.Requested, path: Path, replace: bool = False) -> None:
        self.run_background(self._run_action, req, path, self.ws, replace, self.roles, group="data-act", exclusive=False,
                            description=_("Fix / convert / register"),
                            done=lambda done: self._acted(req, done, path))

    @staticmethod
    def _run_action(job: Job, req: DataActions.Requested, path: Path, ws, replace: bool = False, roles=((), ())):
        from core.data import actions

        return actions.run(req.action, path, write=req.write, output=req.output, yes=req.yes,
                           source_format=req.source_format, name=req.name, holdout=req.holdout, ws_root=ws.root,
                           dataset_dir=ws.data_dir, replace=replace, agents=roles[0], customers=roles[1])

    def _acted(self, req: DataActions.Requested, done, path: Path | None = None) -> None:
        self.query_one(DataActions).show_result(done.lines, done.rows, error=done.error)
        detected = getattr(done.result, "detected", None)
        if req.action == "convert" and detected is not None and path == self.path and any(self.roles):
            note = self.query_one(OpenedNote)
            note.show(note.opened, detected.line())  # the counts with the person's roles
        if done.confirm and path is not None:  # core asks first (an existing file would be replaced)
            from tui.widgets.confirm import ConfirmScreen

            self.app.push_screen(ConfirmScreen(done.confirm, yes=_("Replace")),
                                 lambda ok: self._act(req, path, replace=True) if ok else None)
            return
        if done.error or not req.write:
            return
        if req.action == "register":
            self.app.apply_change(done.result.state_change(self.ws.rel(self.path)))
        else:
            self.query_one(DataFileTree).reload()
            written = Path(done.result.output)
            self.app.notify(_("wrote {path}; it is open now: lint it, then register it", path=self.ws.rel(written)),
                            timeout=6)
            self.open_file(written)
