"""docs/troubleshooting.md (and its Chinese twin) are generated from the doctor's checks and the
diagnoses: the committed pages must be exactly what the code generates now."""

from core.train.troubleshooting import PAGES, render_all


def test_troubleshooting_pages_are_current():
    pages = render_all()
    for lang, path in PAGES.items():
        assert path.read_text(encoding="utf-8") == pages[lang], (
            f"{path} is out of date: run `python -m core.train.troubleshooting --write`")


def test_every_check_and_diagnosis_is_on_the_page():
    from core.train.failure_rules import rules
    from core.doctor.registry import all_verdicts

    page = render_all()["en"]
    for v in all_verdicts():
        assert f"`{v.id}`" in page
    for rule in rules():
        assert f"`{rule.id}`" in page and rule.fix in page
