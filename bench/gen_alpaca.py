"""Generate the benchmark's alpaca JSONL: N rows, seeded, the shape of Part B of
shared/reference/data-lint-rules-and-baselines.md.

instruction 10-80 chars; input empty in 60% of rows; output 50-600 chars; 40% mostly Chinese,
45% English, 15% mixed; about 2% exact duplicates and 1% near duplicates injected.

    python bench/gen_alpaca.py bench/out/alpaca_1m.jsonl 1000000 42
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import orjson

ZH = ("订单发货退款地址修改发票积分会员优惠券客服物流快递包裹仓库支付宝微信银联商品质量售后换货补发签收"
      "请您稍等我们会尽快为处理感谢耐心如果有任何问题欢迎随时联系工作日内完成核实信息账户密码登录注册手机号")
EN = ("order refund shipping address invoice points member coupon support courier parcel warehouse payment "
      "quality after-sales exchange replacement signed please wait we will process thank you patience if any "
      "question contact us within business days verify account password login register phone number").split()


ZH_POOL = ZH * 12 + "，，。。？！"


def _zh(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(ZH_POOL, k=n))


def _en(rng: random.Random, n: int) -> str:
    words = rng.choices(EN, k=n // 5 + 2)
    return " ".join(words)[:n].strip() or "ok"


def _text(rng: random.Random, lang: str, n: int) -> str:
    if lang == "zh":
        return _zh(rng, n)
    if lang == "en":
        return _en(rng, n)
    half = n // 2
    return _zh(rng, half) + " " + _en(rng, n - half)


def _row(rng: random.Random) -> dict:
    r = rng.random()
    lang = "zh" if r < 0.40 else "en" if r < 0.85 else "mix"
    out_len = min(600, max(50, int(rng.lognormvariate(5.0, 0.55))))
    return {
        "instruction": _text(rng, lang, rng.randint(10, 80)),
        "input": "" if rng.random() < 0.6 else _text(rng, lang, rng.randint(10, 120)),
        "output": _text(rng, lang, out_len),
    }


def _near(rng: random.Random, row: dict) -> dict:
    out = row["output"]
    i = rng.randrange(len(out))
    return {**row, "output": out[:i] + rng.choice("的了是 ,.") + out[i + 1:]}


def generate(path: Path, rows: int, seed: int = 42) -> Path:
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    recent: list[dict] = []
    with open(path, "wb", buffering=1 << 20) as fh:
        for _ in range(rows):
            r = rng.random()
            if recent and r < 0.02:
                row = rng.choice(recent)
            elif recent and r < 0.03:
                row = _near(rng, rng.choice(recent))
            else:
                row = _row(rng)
                if len(recent) < 5000:
                    recent.append(row)
                else:
                    recent[rng.randrange(5000)] = row
            fh.write(orjson.dumps(row))
            fh.write(b"\n")
    return path


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/out/alpaca_1m.jsonl")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 42
    generate(target, n, seed)
    print(f"{target}: {n} rows, {target.stat().st_size:,} bytes")
