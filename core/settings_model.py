"""The checked form of devtune's settings (pydantic-settings), loaded through core.settings (see there)."""

from __future__ import annotations

from functools import lru_cache
from typing import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.errors import BadInput
from core.i18n import _
from core.settings import GPU_BACKENDS, PREFIX, variables


class Settings(BaseSettings):
    """The `DEVTUNE_*` variables of this process (None: not set)."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore", frozen=True, case_sensitive=False)

    workspace: str | None = None
    theme: str | None = None
    doctor_replay: str | None = None
    gpu_backend: str | None = None
    serve_python: str | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value):
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("gpu_backend")
    @classmethod
    def _known_backend(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if value in GPU_BACKENDS or value.startswith("replay:"):
            return value
        raise ValueError(_("must be one of {choices}, or replay:<folder>", choices=", ".join(GPU_BACKENDS)))

    def environment(self) -> dict[str, str]:
        """The variables as they must be set for a child process to see the same settings."""
        return {PREFIX + name.upper(): str(value) for name, value in self.model_dump().items() if value is not None}


def load(environ: Mapping[str, str] | None = None) -> Settings:
    """Read and check the variables from `environ` (default: this process's environment)."""
    try:
        return Settings.model_validate(variables(environ))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = PREFIX + str(err["loc"][0]).upper() if err.get("loc") else PREFIX + "?"
            problems.append(_("{var}={value}: {reason}", var=name, value=err.get("input"),
                              reason=str(err.get("msg", "")).removeprefix("Value error, ")))
        raise BadInput("; ".join(problems)) from exc


@lru_cache(maxsize=8)
def _cached(items: frozenset[tuple[str, str]]) -> Settings:
    return load({PREFIX + k.upper(): v for k, v in items})


def current() -> Settings:
    """This process's settings, checked once for a given environment (a test that sets a variable gets the
    new value; nothing else re-reads it)."""
    return _cached(frozenset(variables().items()))


class Preferences(BaseModel):
    """What the wizard remembers for one workspace (`.devtune/state.json`, `settings`)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    theme: str | None = None
    data_template: str = Field("llama3", alias="data.template")

    @classmethod
    def of(cls, stored: Mapping[str, str] | None) -> "Preferences":
        return cls.model_validate(dict(stored or {}))

    def stored(self, **changes) -> dict[str, str]:
        """The preferences with `changes`, as state.json keeps them."""
        merged = self.model_copy(update=changes)
        return {k: v for k, v in merged.model_dump(by_alias=True).items() if v is not None}


def theme(settings: Settings, prefs: Preferences) -> str | None:
    """The theme to open with: DEVTUNE_THEME, else the one the workspace remembers."""
    return settings.theme or prefs.theme
