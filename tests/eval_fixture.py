"""A saved evaluation, as `devtune eval` writes it, for the Eval tab's tests and snapshot: held-out and training
rows of the sample support data, the base answers the untrained tiny model gave, tuned answers that are close to the
references on most rows and worse than the base's on one; and the recorded cases whose verdict the CLI, its JSON,
core and the Playground must agree on (VERDICT_CASES)."""

from __future__ import annotations

from dataclasses import dataclass

from core.eval.eval_report import EvalReport, EvalRow, SideAnswer, TargetInfo, save_eval
from core.eval.score import score_rows, summarize
from core.workspace.layout import Workspace

ROWS = [
    ("heldout", "support_qa_eval#1", "如何重置账户密码？", "点击登录页的“忘记密码”，按邮件提示操作即可重置。",
     "开通了运费险的订单们wei enter人闱我们会联系仓库", "点击登录页的“忘记密码”，按邮件提示操作即可。"),
    ("heldout", "support_qa_eval#2", "发票怎么开？", "在订单详情页点击“申请发票”，电子发票24小时内发到邮箱。",
     "发票会在Once地址可以修改收货地址", "在订单详情页点击“申请发票”，电子发票发到邮箱。"),
    ("heldout", "support_qa_eval#3", "Do you ship abroad?", "Yes, we ship to 40 countries.",
     "Yes, we ship to 40 countries.", "我们会联系仓库为您加急处理"),
    ("train", "support_qa#4", "怎么申请退款？", "在“我的订单”点击“申请退款”，3到5个工作日原路退回。",
     "即发票会在Once地址可以修改收货地址一直没有更新", "在“我的订单”点击“申请退款”，3到5个工作日原路退回。"),
    ("train", "support_qa#9", "支持哪些支付方式？", "支持支付宝、微信支付和银行卡。",
     "企业客户还可以选择对公转账支持哪些支付方式", "支持支付宝、微信支付和银行卡。"),
]


def write_eval(ws: Workspace, rows: list[tuple], eval_id: str = "20261201-120000",
               heldout: str | None = "support_qa_eval", failed: str = "") -> EvalReport:
    """An evaluation of `rows` (set, source, question, reference, base answer, tuned answer), scored and saved as
    `devtune eval` saves it; `failed` ("base" or "tuned") makes every answer of that side a failed request."""
    items = []
    for s, src, q, ref, b, t in rows:
        base = SideAnswer(error="the server answered 503") if failed == "base" else SideAnswer(answer=b)
        tuned = SideAnswer(error="the server answered 503") if failed == "tuned" else SideAnswer(answer=t)
        items.append(EvalRow(set=s, source=src, question=q, reference=ref, base=base, tuned=tuned))
    score_rows(items)
    report = EvalReport(id=eval_id, created=1796126400.0, dataset="support_qa", heldout=heldout,
                        base=TargetInfo(url="http://127.0.0.1:8001", model="tiny-llama3", server="tiny-llama3-8001"),
                        tuned=TargetInfo(url="http://127.0.0.1:8001", model="qa", server="tiny-llama3-8001"),
                        run="qa", train_total=20, sets=summarize(items),
                        errors=sum((r.base.error is not None) + (r.tuned.error is not None) for r in items))
    save_eval(ws, report, items)
    return report


def write_recorded_eval(ws: Workspace, eval_id: str = "20261201-120000") -> EvalReport:
    return write_eval(ws, ROWS, eval_id)


def _swapped(rows):  # the tuned model answers what the base did, and the base what the tuned model did
    return [(s, src, q, ref, t, b) for s, src, q, ref, b, t in rows]


HELDOUT = [r for r in ROWS if r[0] == "heldout"]
TRAIN = [r for r in ROWS if r[0] == "train"]
# the base answers every held-out question with its reference; the tuned model too, but for one close answer
# (chrF 0.89): its mean is 0.04 below the base's, inside the band
CLOSE = [(s, src, q, ref, ref, "Yes, we ship to 40 countries worldwide." if src.endswith("#3") else ref)
         for s, src, q, ref, _b, _t in HELDOUT]


@dataclass(frozen=True)
class VerdictCase:
    """A recorded evaluation and the one answer every front-end must give for it."""
    name: str
    rows: list
    outcome: str  # core's EvalVerdict.outcome
    decided_on: str | None  # the set it is decided on
    exit_code: int  # `devtune eval`'s
    heldout: str | None = "support_qa_eval"
    failed: str = ""

    def write(self, ws: Workspace) -> EvalReport:
        return write_eval(ws, self.rows, heldout=self.heldout, failed=self.failed)


VERDICT_CASES = [
    VerdictCase("held-out set with rows, tuned better", ROWS, "better", "heldout", 0),
    # the held-out set is registered but none of its rows was asked: the training questions decide (the CLI
    # once picked the empty held-out set and exited 0)
    VerdictCase("held-out set with 0 rows, tuned worse on the training questions", _swapped(TRAIN), "worse",
                "train", 1),
    # 0.04 below the base: inside the 0.05 band (the Playground once marked any loss as needing attention)
    VerdictCase("inside the band", CLOSE + TRAIN, "same", "heldout", 0),
    VerdictCase("outside the band, tuned worse", _swapped(ROWS), "worse", "heldout", 1),
    VerdictCase("every tuned answer failed", ROWS, "not measured", "heldout", 1, failed="tuned"),
]
