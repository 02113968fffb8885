"""Where notifications go: the workspace's `.devtune/notify.json`, a list of targets, written atomically with
permissions 0600 (a webhook URL is a credential) by `devtune notify add` / `remove`.

A target's URL is stored there, or named by an environment variable (`url_env`) and read only when a message is
sent; a signing secret (Feishu/Lark signature verification, DingTalk 加签) is never stored: it is read from an
environment variable (`secret_env`) or from a file only its owner can read (`secret_file`, mode 0600). A run's
supervisor inherits the environment of the `devtune train` that started it, so a variable must be set there; a
secret file works whatever starts the run.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from core.errors import BadInput, Refused, Unavailable
from core.files.atomic import write_atomic
from core.i18n import _
from core.notify.events import KINDS
from core.notify.formats import FORMATS, SIGNED_FORMATS
from core.notify.redact import redact_url
from core.workspace.layout import Workspace

VERSION = 1


class Target(BaseModel):
    name: str
    format: str  # one of core.notify.formats.FORMATS
    url: str | None = None
    url_env: str | None = None
    secret_env: str | None = None
    secret_file: str | None = None
    command: list[str] | None = None  # format "command": argv, the event's JSON on stdin
    events: list[str] = Field(default_factory=lambda: list(KINDS))

    def shown(self) -> str:
        """Where it sends, as it may be shown and logged: the URL redacted, the variable's name, the command."""
        if self.format == "command":
            return " ".join(self.command or [])
        if self.url_env:
            return "$" + self.url_env
        return redact_url(self.url or "")

    def resolved_url(self) -> str:
        if self.url:
            return self.url
        value = os.environ.get(self.url_env or "", "").strip()
        if not value:
            raise Unavailable(_("notify target {name}: the environment variable {var} holding its URL is not set",
                                name=self.name, var=self.url_env))
        return value

    def signing_secret(self) -> str | None:
        if self.secret_env:
            value = os.environ.get(self.secret_env, "").strip()
            if not value:
                raise Unavailable(_("notify target {name}: the environment variable {var} holding its signing "
                                    "secret is not set", name=self.name, var=self.secret_env))
            return value
        if self.secret_file:
            return read_secret_file(Path(self.secret_file), self.name)
        return None

    def public(self) -> dict:
        """The target for `notify list --json`: where it sends redacted, never a secret."""
        return {"name": self.name, "format": self.format, "to": self.shown(), "events": list(self.events),
                "signed": bool(self.secret_env or self.secret_file), "secret_env": self.secret_env,
                "secret_file": self.secret_file, "url_env": self.url_env}


class NotifyConfig(BaseModel):
    version: int = VERSION
    targets: list[Target] = Field(default_factory=list)


def read_secret_file(path: Path, name: str) -> str:
    try:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise BadInput(_("notify target {name}: {path} can be read by others (mode {mode}); run `chmod 600 "
                             "{path}`", name=name, path=str(path), mode=oct(mode & 0o777)))
        value = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise Unavailable(_("notify target {name}: cannot read its signing secret from {path}: {error}",
                            name=name, path=str(path), error=exc.strerror or str(exc))) from exc
    if not value:
        raise BadInput(_("notify target {name}: {path} is empty", name=name, path=str(path)))
    return value


def config_path(ws: Workspace) -> Path:
    return ws.state_dir / "notify.json"


def load_config(ws: Workspace) -> NotifyConfig:
    path = config_path(ws)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return NotifyConfig()
    try:
        return NotifyConfig.model_validate_json(raw)
    except (ValidationError, ValueError) as exc:
        raise BadInput(_("{path} is damaged: {error}; fix it or remove it and add the targets again",
                         path=str(path), error=str(exc).splitlines()[0])) from exc


def load_targets(ws: Workspace) -> list[Target]:
    return load_config(ws).targets


def _save(ws: Workspace, config: NotifyConfig) -> None:
    write_atomic(config_path(ws), json.dumps(config.model_dump(mode="json", exclude_none=True), indent=2,
                                             ensure_ascii=False) + "\n", file_mode=0o600)


def check_target(target: Target) -> None:
    """The rules a target follows, said with what to do."""
    if target.format not in FORMATS:
        raise BadInput(_("unknown notify format {fmt}; use one of {choices}", fmt=target.format,
                         choices=", ".join(FORMATS)))
    unknown = [e for e in target.events if e not in KINDS]
    if unknown or not target.events:
        raise BadInput(_("unknown notify events {events}; use some of {choices}", events=", ".join(unknown) or "-",
                         choices=", ".join(KINDS)))
    if target.format == "command":
        if not target.command:
            raise BadInput(_("a command target needs the command to run"))
        return
    if bool(target.url) == bool(target.url_env):
        raise BadInput(_("give the webhook's URL, or --url-env with the variable that holds it (not both)"))
    if target.url and not target.url.startswith(("https://", "http://")):
        raise BadInput(_("{url} is not an http(s) URL", url=redact_url(target.url)))
    if (target.secret_env or target.secret_file) and target.format not in SIGNED_FORMATS:
        raise BadInput(_("{fmt} webhooks are not signed; a signing secret is for {signed}", fmt=target.format,
                         signed=", ".join(SIGNED_FORMATS)))
    if target.secret_env and target.secret_file:
        raise BadInput(_("give --secret-env or --secret-file, not both"))


def add_target(ws: Workspace, target: Target) -> Target:
    check_target(target)
    ws.state_dir.mkdir(parents=True, exist_ok=True)
    with ws.locked():
        config = load_config(ws)
        if any(t.name == target.name for t in config.targets):
            raise Refused(_("a notify target named {name} exists; pick another --name or remove it first",
                            name=target.name))
        config.targets.append(target)
        _save(ws, config)
    return target


def remove_target(ws: Workspace, name: str) -> Target:
    with ws.locked():
        config = load_config(ws)
        found = [t for t in config.targets if t.name == name]
        if not found:
            raise Unavailable(_("no notify target named {name}; `devtune notify list` shows them", name=name))
        config.targets = [t for t in config.targets if t.name != name]
        _save(ws, config)
    return found[0]


def default_name(ws: Workspace, fmt: str) -> str:
    taken = {t.name for t in load_targets(ws)}
    name, n = fmt, 1
    while name in taken:
        n += 1
        name = f"{fmt}-{n}"
    return name
