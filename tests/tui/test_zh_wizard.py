"""The wizard in Chinese has no English left in what it says (issue 29, item 13): the Data step's statistics
(`tokens（estimate）`, `mixed`), the Config form's choices (no literal backticks), the Merge step's plan for a
stopped run (`以 stopped 状态结束`); what a workspace saved in English says (the steps' summaries, the export's
check before F6, the no-GPU reason); the steps' intros (no literal backticks) and their footers at 120×40 (no
key under `^p`). Rendered in a fresh interpreter (tests/tui/zh_render.py)."""

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
    assert set(seen) == {"data stats", "config choices", "merge plan", "saved summaries", "merge checks",
                         "gpu reason", "intro", "footer"} and all(seen.values()), seen
    footers = seen.pop("footer")
    seen["footer rows"] = [f["row"] for f in footers]
    named = {**seen, "saved summaries": [t.replace("support", "{name}") for t in seen["saved summaries"]]}
    english = {part: [(t, english_left(t)) for t in texts if english_left(t)] for part, texts in named.items()}
    assert not any(english.values()), english
    assert not [t for t in seen["config choices"] if "`" in t], seen["config choices"]

    # a workspace saved in English (tests/tui/zh_render.saved_in_english) opened in Chinese: the steps' saved
    # summaries, the export's check (before F6 runs it again) and the GPU sampler's reason
    assert seen["saved summaries"][0].startswith("✓ 数据集 support："), seen["saved summaries"]
    assert seen["saved summaries"][1].startswith("! exports/m：检查发现问题"), seen["saved summaries"]
    assert "✗ 权重: 没有 *.safetensors 或 *.bin 权重文件" in seen["merge checks"], seen["merge checks"]
    assert seen["gpu reason"][0].startswith("本机没有 GPU（在 CPU 上运行）："), seen["gpu reason"]
    # a step's intro draws its `terms` styled, not between backticks (the Train step's `llamafactory-cli train`)
    assert not [t for t in seen["intro"] if "`" in t] and len(seen["intro"]) == 6, seen["intro"]
    # at 120×40 each footer key is whole, and none runs under the palette key (it read `^p 命  面板`)
    assert len(footers) == 6
    for footer in footers:
        assert footer["row"].rstrip().endswith("▏^p 命令面板"), footer
        shown = footer["row"].split("▏")[0]
        assert footer["keys"][-1] == "^p 命令面板" and all(k in shown for k in footer["keys"][:-1]), footer
        assert "  ".join(footer["keys"][:-1]) in shown, footer
