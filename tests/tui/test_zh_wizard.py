"""The wizard in Chinese has no English left in what it says (issue 29, item 13): the Data step's statistics
(`tokens（estimate）`, `mixed`), the Config form's choices (no literal backticks), the Merge step's plan for a
stopped run (`以 stopped 状态结束`). Rendered in a fresh interpreter (tests/tui/zh_render.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.core.test_zh_text import english_left

ROOT = Path(__file__).resolve().parents[2]


def test_the_wizard_in_chinese_says_its_statistics_choices_and_plans_in_chinese(tmp_path):
    env = {**os.environ, "DEVTUNE_LANG": "zh"}
    out = subprocess.run([sys.executable, "-m", "tests.tui.zh_render", str(tmp_path / "ws")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(seen) == {"data stats", "config choices", "merge plan"} and all(seen.values()), seen
    english = {part: [(t, english_left(t)) for t in texts if english_left(t)] for part, texts in seen.items()}
    assert not any(english.values()), english
    assert not [t for t in seen["config choices"] if "`" in t], seen["config choices"]
