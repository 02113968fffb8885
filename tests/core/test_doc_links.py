"""Every file devtune's docs link to or name, and every reference the doctor prints, is a file of the project
(issue 29, item 9: `Reference: reference/cpu-stack.md` named a file no checkout has)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MACHINES = ROOT / "tests" / "fixtures" / "doctor" / "machines"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# a path of the project named in prose: a top-level folder of the checkout (or reference/, which it has not;
# data/ is left out: in the docs it is the workspace's data folder, the person's files)
NAMED = re.compile(r"(?<![\w/.<{-])((?:reference|docs|core|cli|screens|tui|tests|bench)/[\w./-]*\w\.(?:md|py|json|yaml|tcss))(?!\w)")


def missing_in(text: str, page: Path) -> list[str]:
    out = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:|^#", target):
            continue  # a web address, an anchor on the same page
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            out.append(f"{page.relative_to(ROOT)}: link {target}")
    for named in NAMED.findall(text):
        if not (ROOT / named).exists():
            out.append(f"{page.relative_to(ROOT)}: names {named}")
    return out


def test_every_link_and_named_file_of_the_docs_exists():
    broken = [m for page in PAGES for m in missing_in(page.read_text(encoding="utf-8"), page)]
    assert not broken, "\n".join(broken)


def test_the_check_catches_a_missing_file():
    page = ROOT / "docs" / "troubleshooting.md"
    assert missing_in("Reference: reference/cpu-stack.md, see [x](steps/none.md)", page) == [
        "docs/troubleshooting.md: link steps/none.md", "docs/troubleshooting.md: names reference/cpu-stack.md"]
    assert missing_in("see [guide](steps/1-data.md#rules) and docs/cpu-stack.md", page) == []


def test_every_doctor_reference_is_a_file_of_the_project():
    from core.doctor.runner import replay

    broken = set()
    for folder in sorted(p for p in MACHINES.iterdir() if p.is_dir()):
        report, _ev = replay(folder)
        for check in report.checks:
            for named in NAMED.findall(check.reference or ""):  # a file, not an issue (ROCm/ROCm#1152)
                if not (ROOT / named).exists():
                    broken.add(f"{check.id}: {named}")
    assert not broken, "\n".join(sorted(broken))
