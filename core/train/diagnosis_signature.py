"""The version-skew family for a call whose arguments do not fit the function called: `f() got an unexpected
keyword argument 'k'`, `f() takes 2 positional arguments but 3 were given`, `f() missing 1 required positional
argument: 'x'`. Python raises these at the call, so the traceback's innermost frame is the caller, and the function
belongs to another package (or to the person's own code, overriding a library's method). The two were written
for different versions of each other: which package called, which one defines the function, both versions (the
log's `pip list`, else the run's environment), the range the caller declares, and both ways to make them agree.

The callee is found from what the log holds, for any package: the module alias on the call line (`pd.read_json(`
-> pandas), the class named in the message whose module is a frame of the traceback (DPOTrainer ->
trl/trainer/dpo_trainer.py), or a `def f(self, ...)` the log shows outside site-packages (an override in the
person's script). A frame's package is its folder under site-packages, or under `src/` of a source checkout
(`LLaMA-Factory/src/llmtuner/...` -> llmtuner).
"""

from __future__ import annotations

import re

from core.i18n import _
from core.train.diagnosis_families import FamilyFinding

SIGNATURE = re.compile(r"(?P<fn>[A-Za-z_][\w.]*)\(\) (?:got an unexpected keyword argument '(?P<kw>\w+)'|"
                       r"takes (?P<takes>\d+) positional arguments? but (?P<given>\d+) (?:were|was) given|"
                       r"missing (?P<missing>\d+) required positional arguments?: (?P<names>.+))")
FRAME = re.compile(r'File "(?P<path>[^"]+)", line \d+, in (?P<func>[\w<>]+)')
ALIASES = {"pd": "pandas", "np": "numpy", "F": "torch", "nn": "torch", "dist": "torch", "plt": "matplotlib",
           "pa": "pyarrow", "pq": "pyarrow"}
PIP_LINE = re.compile(r"^([A-Za-z][\w.-]*)\s+(\d+\.\d+[\w.+-]*)(?:\s+\S+)?\s*$", re.M)


def package_of(path: str) -> str | None:
    m = re.search(r"(?:site|dist)-packages/([A-Za-z_]\w*)/|/src/([A-Za-z_]\w*)/", path)
    return (m.group(1) or m.group(2)).lower() if m else None


def _frames(frames: str) -> list[tuple[str, str, str]]:
    """(path, function, the code line after it) of each frame, outermost first."""
    lines = [re.sub(r"^\[[\w-]+\]:\s?|^\S+:\s(?=\s*File)", "", line) for line in frames.splitlines()]
    out = []
    for i, line in enumerate(lines):
        m = FRAME.search(line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not FRAME.search(lines[i + 1]) else ""
            out.append((m.group("path"), m.group("func"), code))
    return out


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def pip_versions(log_text: str) -> dict[str, str]:
    """`pip list` lines the log holds (name, version), and `name==version`."""
    found = {m.group(1).lower().replace("_", "-"): m.group(2) for m in PIP_LINE.finditer(log_text)}
    found.update({a.lower(): b for a, b in re.findall(r"\b([A-Za-z][\w.-]*)==(\d+\.\d+[\w.+-]*)", log_text)})
    return found


def _callee(fn: str, stack: list[tuple[str, str, str]], log_text: str) -> tuple[str | None, bool]:
    """(the package that defines `fn`, whether it is the person's own override), from what the log shows."""
    name = fn.split(".")[-1]
    cls = fn.split(".")[-2] if "." in fn else None
    code = stack[-1][2] if stack else ""
    call = re.search(r"(?:^|[\s=(])([A-Za-z_]\w*)\.(?:\w+\.)*" + re.escape(name) + r"\(", code)
    if call and call.group(1) not in ("self", "super", "cls"):
        alias = call.group(1)
        return ALIASES.get(alias, alias.lower()), False
    if cls:
        for path, _func, _code in stack:
            if path.rsplit("/", 1)[-1].removesuffix(".py") in (_snake(cls), cls.lower()) and package_of(path):
                return package_of(path), False
    lines = log_text.splitlines()
    for i, line in enumerate(lines):
        if not re.search(r"\bdef " + re.escape(name) + r"\(self\b", line):
            continue
        before = "\n".join(lines[max(0, i - 10):i] + [line])
        if re.search(r"(?:site|dist)-packages/[^\n]*\n[^\n]*$", before):
            continue  # the source line of a library's own frame
        files = [f for f in re.findall(r"([\w./-]+\.py)\b", before) if "-packages/" not in f]
        return (files[-1] if files else _("the run's own code")), True
    return None, False


def signature_skew(root: str, frames: str, *, python=None, log_text: str = "") -> FamilyFinding | None:
    from core.train.diagnosis_versions import declared, installed, satisfies

    m = SIGNATURE.search(root)
    stack = _frames(frames)
    if m is None or not stack:
        return None
    name = m.group("fn").split(".")[-1]
    # the call site: the innermost frame whose line calls it (decorators below it pass *args, **kwargs on)
    site = next((i for i in range(len(stack) - 1, -1, -1) if re.search(r"\b" + re.escape(name) + r"\(",
                                                                      stack[i][2])), len(stack) - 1)
    stack = stack[:site + 1]
    caller = package_of(stack[-1][0])
    callee, override = _callee(m.group("fn"), stack, log_text)
    if caller is None or callee is None or callee == caller:
        return None
    fn = m.group("fn")
    what = (_("the argument `{arg}`", arg=m.group("kw")) if m.group("kw") else
            _("{given} positional arguments where it takes {takes}", given=m.group("given"), takes=m.group("takes"))
            if m.group("takes") else _("too few arguments (missing {names})", names=m.group("names").strip()))
    printed = pip_versions(log_text)
    dists = [caller] + ([] if override else [callee])
    facts_of = installed(dists, python=python, log_text=log_text)
    version = {d: printed.get(d) or facts_of[d].version for d in dists}
    facts = [_("{package} {version} installed (from {source})", package=d, version=version[d] or "?",
               source=_("the log") if d in printed else facts_of[d].source) for d in dists]
    facts.append(_("the call: {code} (in {package})", code=stack[-1][2][:120] or fn, package=caller))
    if override:
        facts.append(_("{fn} is defined in {file}, the run's own code", fn=fn, file=callee))
        return FamilyFinding(
            "version-skew", _("Version skew: {file} overrides `{fn}` of {caller} with another signature", file=callee,
                              caller=caller, fn=fn),
            _("{caller} {version} calls `{fn}` with {what}, and the override of `{fn}` in {file} was written for an "
              "older (or newer) {caller}, whose method had another signature.", caller=caller,
              version=version[caller] or "?", fn=fn, what=what, file=callee),
            _("Give the override in {file} the signature of {caller} {version}'s `{fn}` (accept the new arguments "
              "and pass them on to super()), or pin {caller} to the release the script was written for.",
              file=callee, caller=caller, version=version[caller] or "?", fn=fn),
            [f"grep -n 'def {fn.split('.')[-1]}' {callee}", f"pip show {caller}"], facts, own_cause=True)
    spec = declared(facts_of[caller], callee)
    if spec:
        inside = satisfies(version[callee], spec)
        facts.append(_("{caller} declares {provider}{spec}", caller=caller, provider=callee, spec=spec)
                     + ("" if inside is None else " " + (_("(the installed one is inside it)") if inside else
                                                          _("(the installed one is outside it)"))))
    pins = ([f'pip install "{callee}{spec}"'] if spec else
            [f'pip install "{callee}<{version[callee]}"  # ' + _("if {callee} removed it", callee=callee),
             f'pip install -U "{callee}"  # ' + _("if {callee} did not have it yet", callee=callee)]
            if version[callee] else [f'pip install -U "{callee}"'])
    return FamilyFinding(
        "version-skew", _("Version skew: {caller} calls `{fn}` of {callee} with arguments it does not take",
                          caller=caller, callee=callee, fn=fn),
        _("{caller} {cv} passes {what} to `{fn}` of {callee} {v}: the two were released for different versions of "
          "each other ({callee} removed or renamed it since, or did not have it yet).", caller=caller,
          cv=version[caller] or "?", what=what, fn=fn, callee=callee, v=version[callee] or "?"),
        _("Make the pair agree: install the {callee} release {caller} {cv} was written for{within}, or upgrade "
          "{caller} to a release made for {callee} {v}; `pip check` lists what else disagrees.", callee=callee,
          caller=caller, cv=version[caller] or "?", v=version[callee] or "?",
          within=_(" (it declares {spec})", spec=spec) if spec else ""),
        [*pins, f'pip install -U "{caller}"', "pip check"], facts, own_cause=True)
