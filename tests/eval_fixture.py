"""A saved evaluation, as `devtune eval` writes it, for the Eval tab's tests and snapshot: held-out and training
rows of the sample support data, the base answers the untrained tiny model gave, tuned answers that are close to the
references on most rows and worse than the base's on one."""

from __future__ import annotations

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


def write_recorded_eval(ws: Workspace, eval_id: str = "20261201-120000") -> EvalReport:
    rows = [EvalRow(set=s, source=src, question=q, reference=ref, base=SideAnswer(answer=b), tuned=SideAnswer(answer=t))
            for s, src, q, ref, b, t in ROWS]
    score_rows(rows)
    report = EvalReport(id=eval_id, created=1796126400.0, dataset="support_qa", heldout="support_qa_eval",
                        base=TargetInfo(url="http://127.0.0.1:8001", model="tiny-llama3", server="tiny-llama3-8001"),
                        tuned=TargetInfo(url="http://127.0.0.1:8001", model="qa", server="tiny-llama3-8001"),
                        run="qa", train_total=20, sets=summarize(rows))
    save_eval(ws, report, rows)
    return report
