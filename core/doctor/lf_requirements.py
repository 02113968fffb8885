"""The version ranges the installed LLaMA-Factory declares, and how the installed libraries stand against them.

The packages probe (core/doctor/scripts.py LF_STAGE) reads them from LLaMA-Factory in the training environment,
without importing it; this module turns what it reported into ranges (`packaging` specifiers), each saying
where it comes from:

- its package metadata (`Requires-Dist`, markers and extras as written): what pip resolves; outside it
  `pip check` complains, LLaMA-Factory still starts;
- the `check_version()` calls of its `check_dependencies()` (extras/misc.py): outside them LLaMA-Factory
  refuses to start, unless DISABLE_VERSION_CHECK=1;
- its `requirements/*.txt` (deepspeed, bitsandbytes, ...): read from the clone it was installed from; its wheel
  does not ship them, so for a wheel install the files of its release tag, copied below with their source;
- releases LLaMA-Factory marks broken after its own release (BROKEN_RELEASES, each with its issue).

A fix lands inside every range that applies: devtune's own pin (its `train` extra) when that is inside, else
the ranges themselves, for pip to pick the newest release inside.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from core.i18n import _

METADATA, RUNTIME, REQUIREMENTS, BROKEN = "metadata", "runtime", "requirements", "broken"

# requirements/*.txt of LLaMA-Factory's release tags, for installs from its wheel (which lacks them):
# git show v0.9.5:requirements/<file> in github.com/hiyouga/LLaMA-Factory. v0.9.4 had none (its only extra
# range, deepspeed, is in its metadata as `extra == "deepspeed"`).
RELEASE_REQUIREMENTS: dict[str, dict[str, tuple[str, ...]]] = {
    "0.9.5": {
        "deepspeed.txt": ("deepspeed>=0.10.0,<=0.18.4",),
        "bitsandbytes.txt": ("bitsandbytes>=0.39.0",),
        "liger-kernel.txt": ("liger-kernel>=0.6.3",),
    },
}


@dataclass(frozen=True)
class BrokenRelease:
    package: str
    version: str
    why: str  # what breaks: the error as printed
    source: str  # the LLaMA-Factory issue or pull request that marks it
    needs: str | None = None  # breaks only beside this package (None: always)


# Releases LLaMA-Factory excludes after its own release (its main branch's pyproject and check_dependencies).
BROKEN_RELEASES = (
    BrokenRelease("transformers", "5.6.0",
                  "FlashAttention-2: AttributeError: 'NoneType' object has no attribute 'to' (s_aux)",
                  "hiyouga/LLaMA-Factory#10634 (`!=5.6.0`), #10610; huggingface/transformers#45588",
                  needs="flash_attn"),
)


@dataclass(frozen=True)
class StatedException:
    """A pin of devtune's outside a range LLaMA-Factory declares only in requirements/*.txt, on purpose."""

    package: str
    version: str  # devtune's pin
    leaves: str  # the range it leaves
    why: Callable[[], str]  # what fails inside the range, as measured (in the reader's language)
    proof: str  # the test that proves devtune's path works with the pin


# Where devtune must leave a range: each said here, in pyproject.toml's comment and in the README, with its test.
STATED_EXCEPTIONS = (
    StatedException("deepspeed", "0.19.8", "<=0.18.4",
                    lambda: _("ZeRO-3 LoRA on torch 2.13 fails inside it with `AttributeError: 'Linear' object has "
                              "no attribute 'ds_grads_remaining'` (deepspeedai/DeepSpeed#7203; measured with 0.18.4 "
                              "and 0.18.9)"),
                    "tests/e2e/test_train_zero3.py"),
)


def stated_exception(package: str, version: str | None, outside: tuple["Declared", ...]) -> StatedException | None:
    """The stated exception that covers `version` of `package` being outside `outside` (None: none does).
    Only a requirements/*.txt range can be left: outside a runtime check LLaMA-Factory refuses to start."""
    for exc in STATED_EXCEPTIONS:
        if (canonical(exc.package) == canonical(package) and exc.version == version and outside
                and all(d.kind == REQUIREMENTS for d in outside)):
            return exc
    return None


@dataclass(frozen=True)
class Declared:
    package: str  # canonical: lower case, `-` `.` as `_`
    specifier: str  # ">=4.55.0,<=5.6.0"
    kind: str  # METADATA | RUNTIME | REQUIREMENTS | BROKEN
    source: str  # where LLaMA-Factory says it

    def describe(self) -> str:
        return f"{self.specifier} ({self.source})"


@dataclass(frozen=True)
class Mismatch:
    package: str
    installed: str | None  # None: not installed (only a runtime check requires presence)
    ranges: tuple[Declared, ...]  # the ranges it is outside of
    refuses: bool  # LLaMA-Factory refuses to start (a runtime check)

    def describe(self) -> str:
        ranges = "; ".join(d.describe() for d in self.ranges)
        if self.installed is None:
            return _("{package} is not installed; LLaMA-Factory needs {ranges}", package=self.package, ranges=ranges)
        return _("{package} {version} is outside {ranges}", package=self.package, version=self.installed,
                 ranges=ranges)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def installed_version(versions: dict[str, str], package: str) -> str | None:
    wanted = canonical(package)
    for key, value in versions.items():
        if canonical(key) == wanted:
            return value
    return None


def _marker_applies(req: Requirement, python: str | None) -> tuple[bool, str | None]:
    """Whether the requirement's marker holds in the training environment; the extra it belongs to, if any."""
    if req.marker is None:
        return True, None
    env = dict(default_environment())
    if python:
        env.update(python_full_version=python, python_version=".".join(python.split(".")[:2]))
    extras = re.findall(r"extra\s*==\s*[\"']([^\"']+)[\"']", str(req.marker))
    for extra in extras or [""]:
        if req.marker.evaluate({**env, "extra": extra}):
            return True, extras[0] if extras else None
    return False, None


def declared_ranges(lf: dict | None, python: str | None = None) -> list[Declared]:
    """Every range the installed LLaMA-Factory declares (the probe's `llamafactory` section), with its source.
    Requirements without a version range are left out; so is what a marker rules out in this environment."""
    if not lf:
        return []
    version = lf.get("version") or "?"
    name = f"LLaMA-Factory {version}"
    out: list[Declared] = []

    def add(line: str, kind: str, source: str) -> None:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            return
        applies, extra = _marker_applies(req, python)
        if applies and str(req.specifier):
            where = source + (f" [{extra}]" if extra else "")
            written = re.match(r"\s*[A-Za-z0-9._-]+\s*(?:\[[^\]]*\])?\s*([^;]*)", line)
            spec = re.sub(r"\s+", "", written.group(1)) if written else str(req.specifier)
            out.append(Declared(canonical(req.name), spec or str(req.specifier), kind, where))

    for line in lf.get("requires") or []:
        add(line, METADATA, _("{name} package metadata (Requires-Dist)", name=name))
    for check in lf.get("runtime") or []:
        add(check.get("requirement", ""), RUNTIME, f"{name} {check.get('where', 'check_dependencies')}")
    files = lf.get("requirements_txt") or {}
    folder = lf.get("requirements_dir")
    if not files and version in RELEASE_REQUIREMENTS:
        files = RELEASE_REQUIREMENTS[version]
        folder = None
    for file, lines in sorted(files.items()):
        where = (f"{name} {folder}/{file}" if folder else
                 _("{name} requirements/{file} (of its v{version} tag: the wheel does not ship it)", name=name,
                   file=file, version=version))
        for line in lines:
            add(line, REQUIREMENTS, where)
    for broken in BROKEN_RELEASES:
        out.append(Declared(canonical(broken.package), f"!={broken.version}", BROKEN,
                            _("marked broken after its release: {why}; {source}", why=broken.why,
                              source=broken.source)))
    return out


def ranges_for(declared: list[Declared], package: str, kinds: tuple[str, ...] | None = None) -> list[Declared]:
    return [d for d in declared if d.package == canonical(package) and (kinds is None or d.kind in kinds)]


def _contains(spec: str, version: str) -> bool:
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def broken_applies(package: str, versions: dict[str, str]) -> bool:
    """A broken release counts where what it breaks is there (transformers 5.6.0 breaks only with flash-attn)."""
    for broken in BROKEN_RELEASES:
        if canonical(broken.package) == canonical(package):
            return broken.needs is None or installed_version(versions, broken.needs) is not None
    return False


def mismatch(package: str, versions: dict[str, str], declared: list[Declared]) -> Mismatch | None:
    """How `package` stands against every range declared for it (None: inside all, or none declared)."""
    ranges = ranges_for(declared, package)
    have = installed_version(versions, package)
    refuses = any(d.kind == RUNTIME for d in ranges)
    if have is None:
        return Mismatch(canonical(package), None, tuple(d for d in ranges if d.kind == RUNTIME), True) \
            if refuses else None
    outside = tuple(d for d in ranges if not _contains(d.specifier, have))
    if not outside:
        return None
    return Mismatch(canonical(package), have, outside, any(d.kind == RUNTIME for d in outside))


@lru_cache(maxsize=1)
def project_pins() -> dict[str, str]:
    """devtune's own pins (`name==X` of its installed metadata, the `train` extra included)."""
    from importlib import metadata

    pins: dict[str, str] = {}
    try:
        requires = metadata.requires("devtune") or []
    except metadata.PackageNotFoundError:
        return pins
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if exact:
            pins[canonical(req.name)] = exact[0]
    return pins


def install_spec(package: str, declared: list[Declared], *, pins: dict[str, str] | None = None) -> str:
    """`"name==pin"` when devtune's pin is inside every range declared for `package`, else `"name<ranges>"`."""
    ranges = ranges_for(declared, package)
    pin = (project_pins() if pins is None else pins).get(canonical(package))
    name = package.replace("_", "-")
    left = tuple(d for d in ranges if not _contains(d.specifier, pin)) if pin else ()
    if pin and (not left or stated_exception(package, pin, left) is not None):
        return f'"{name}=={pin}"'
    joined = SpecifierSet(",".join(d.specifier for d in ranges)) if ranges else SpecifierSet()
    return f'"{name}{",".join(sorted({str(s) for s in joined}))}"'
