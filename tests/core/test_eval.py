"""devtune eval's parts without a server: which rows are asked, the report and its files, the judge's rubric and
verdicts, lm-eval's command and results, and where base and tuned come from (the real servers: tests/e2e)."""

import json

import pytest

from core.eval.eval_report import (BETTER, NOT_MEASURED, SAME, WORSE, WORSE_BY, EvalRow, SetSummary, SideAnswer,
                                   SideMetrics, eval_verdict, load_eval, markdown, set_label, worse_rows)
from core.eval.harness import HarnessOptions, harness_argv, harness_env, lora_refusal, read_results
from core.eval.judge import judge_body, judge_prompt_file, load_rubric, parse_verdict
from core.eval.questions import EvalInputError, eval_questions, sample
from core.eval.targets import Target, EvalTargets, resolve_targets
from core.serve.chat import Endpoint
from core.serve.client import Reply
from tests.eval_fixture import write_recorded_eval


def _dataset(ws, n=30, held=5, eval_entry=True):
    rows = [{"instruction": f"问题 {i}？", "input": "", "output": f"答案 {i}。"} for i in range(n)]
    (ws.data_dir / "qa.train.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    (ws.data_dir / "qa.heldout.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                          for r in rows[:held]))
    info = {"qa": {"file_name": "qa.train.jsonl"}}
    if eval_entry:
        info["qa_eval"] = {"file_name": "qa.heldout.jsonl"}
    (ws.data_dir / "dataset_info.json").write_text(json.dumps(info))


def test_every_held_out_row_and_a_seeded_training_sample(workspace):
    _dataset(workspace)
    q = eval_questions(workspace, "qa", train_sample=8, seed=3)
    assert q.heldout_name == "qa_eval" and len(q.heldout) == 5 and len(q.train) == 8 and q.train_total == 30
    assert {x.split for x in q.heldout} == {"heldout"} and {x.split for x in q.train} == {"train"}
    again = eval_questions(workspace, "qa", train_sample=8, seed=3)
    assert [x.source for x in again.train] == [x.source for x in q.train]  # the same rows for the same seed
    other = eval_questions(workspace, "qa", train_sample=8, seed=4)
    assert [x.source for x in other.train] != [x.source for x in q.train]
    sources = [x.source for x in q.train]
    assert sources == sorted(sources, key=lambda s: int(s.split("#")[1]))  # in file order
    assert len(sample(q.train, 100, 0)) == 8 and sample(q.train, 0, 0) == []


def test_without_a_held_out_set_only_training_rows(workspace):
    _dataset(workspace, eval_entry=False)
    q = eval_questions(workspace, "qa", train_sample=4)
    assert q.heldout_name is None and q.heldout == [] and len(q.train) == 4
    with pytest.raises(EvalInputError, match="dataset nope is not in"):
        eval_questions(workspace, "nope")
    (workspace.data_dir / "dataset_info.json").write_text("{broken")
    with pytest.raises(EvalInputError, match=r"dataset_info.json:1:\d+: invalid JSON"):
        eval_questions(workspace, "qa")
    _dataset(workspace)
    (workspace.data_dir / "qa.heldout.jsonl").unlink()
    with pytest.raises(EvalInputError, match="qa_eval is registered but its file is gone"):
        eval_questions(workspace, "qa")


def test_the_report_its_table_files_and_the_rows_the_tuned_model_lost(workspace):
    report = write_recorded_eval(workspace)
    result = load_eval(workspace, report.id)
    saved, rows = result.report, result.rows
    assert saved.sets["heldout"].rows == 3 and saved.sets["train"].rows == 2 and len(rows) == 5
    data = saved.to_json()
    assert set(data["sets"]) == {"heldout", "train"}
    assert set(data["sets"]["heldout"]) >= {"rows", "base", "tuned"}
    assert set(data["sets"]["heldout"]["base"]) >= {"chrf", "bleu", "rouge_l", "exact", "judge"}
    table = saved.table()
    assert table[0][:2] == ["held-out (3)", "base"] and table[2][1] == "Δ" and len(table) == 6
    assert saved.header()[:3] == ["set", "model", "chrF"] and "judge 1-5" not in saved.header()
    lost = worse_rows(rows)
    assert [r.source for r in lost] == ["support_qa_eval#3"] and saved.sets["heldout"].worse == 1
    assert "beats its base on the held-out questions" in saved.verdict.line
    md = (workspace.root / saved.folder / "report.md").read_text()
    assert md == markdown(saved, rows) and "Do you ship abroad?" in md and "| held-out (3) | base |" in md
    text = "\n".join(saved.lines())
    assert "1 row where the tuned model did worse" in text and "report.md" in text


def _sets(held: tuple | None, train: tuple, errors: int = 0) -> dict[str, SetSummary]:
    def summary(pair, rows=4):
        return SetSummary(rows=rows, base=SideMetrics(chrf=pair[0]), tuned=SideMetrics(chrf=pair[1], errors=errors))
    return {"heldout": summary(held) if held else SetSummary(), "train": summary(train)}


@pytest.mark.parametrize("held, train, outcome, decided", [
    ((0.50, 0.46), (0.1, 0.9), SAME, "heldout"),  # 0.04 lost: inside the band
    ((0.50, 0.45), (0.1, 0.9), SAME, "heldout"),  # the band's edge is still the same
    ((0.50, 0.44), (0.1, 0.9), WORSE, "heldout"),
    ((0.50, 0.56), (0.9, 0.1), BETTER, "heldout"),  # the held-out questions decide, not the training ones
    (None, (0.60, 0.30), WORSE, "train"),  # no held-out question asked: the training ones decide
    (None, (0.30, 0.60), BETTER, "train")])
def test_the_verdict_is_decided_on_the_held_out_questions_with_a_band(held, train, outcome, decided):
    verdict = eval_verdict(_sets(held, train))
    assert (verdict.outcome, verdict.set, verdict.band) == (outcome, decided, WORSE_BY)
    assert verdict.ok == (outcome != WORSE)
    assert set_label(decided) in verdict.line and set_label(decided) in verdict.mark


def test_a_failed_answer_or_nothing_asked_is_no_pass():
    failed = eval_verdict(_sets((0.5, 0.6), (0.5, 0.6), errors=1))
    assert failed.outcome == BETTER and not failed.ok and "2 answers failed" in failed.mark
    assert eval_verdict(_sets((0.5, 0.6), (0.5, 0.6), errors=4)).outcome == NOT_MEASURED  # every tuned one
    nothing = eval_verdict({"heldout": SetSummary(), "train": SetSummary()})
    assert nothing.outcome == NOT_MEASURED and not nothing.ok and nothing.set is None


def test_eval_show_reads_a_saved_evaluation_or_says_there_is_none(workspace, capsys):
    from cli.main import main

    assert main(["-w", str(workspace.root), "eval", "--show"]) == 2
    assert "no evaluation is saved in .devtune/evals" in capsys.readouterr().err
    write_recorded_eval(workspace)
    assert main(["-w", str(workspace.root), "eval", "--show", "nope"]) == 2
    said = capsys.readouterr().err
    assert "no evaluation nope" in said and "20261201-120000" in said  # and the ones there are
    assert main(["-w", str(workspace.root), "eval", "--show"]) == 0
    assert "beats its base on the held-out questions" in capsys.readouterr().out


def test_nothing_to_ask_is_bad_input(workspace):
    _dataset(workspace, eval_entry=False)
    with pytest.raises(EvalInputError, match="nothing to ask"):
        eval_questions(workspace, "qa", train_sample=0)


def test_a_row_is_worse_by_the_judge_when_both_were_judged():
    row = EvalRow(set="train", source="x", question="q", reference="r", base=SideAnswer(chrf=0.2, judge=4),
                  tuned=SideAnswer(chrf=0.9, judge=2))
    assert row.worse
    row.tuned.judge = None
    assert not row.worse  # by chrF then


def test_the_rubric_is_a_workspace_file_with_known_placeholders(workspace):
    path = judge_prompt_file(workspace.configs_dir)
    assert path == workspace.configs_dir / "eval" / "judge.md"
    rubric = load_rubric(path)
    body = judge_body("judge-m", rubric, "怎么退款？", "3到5个工作日。", "五天。")
    prompt = body["messages"][0]["content"]
    assert "怎么退款？" in prompt and "3到5个工作日。" in prompt and "五天。" in prompt and "{{" not in prompt
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema" and schema["required"] == ["score", "reason"]
    assert schema["properties"]["score"] == {"type": "integer", "minimum": 1, "maximum": 5}
    path.write_text(rubric + "\nBe kind.\n")
    judge_prompt_file(workspace.configs_dir)
    assert "Be kind." in path.read_text()  # the person's edit is kept
    path.write_text("{{answer}} {{colour}}")
    with pytest.raises(EvalInputError, match=r"judge.md uses \{\{colour\}\}"):
        load_rubric(path)
    path.write_text("{{answer}} only")
    with pytest.raises(EvalInputError, match="must show the judge"):
        load_rubric(path)


@pytest.mark.parametrize("reply, score, problem", [
    (Reply(content='{"score": 4, "reason": "Mostly  right."}', finish="stop"), 4, ""),
    (Reply(content='{"score": 7, "reason": "x"}', finish="stop"), None, "no score from 1 to 5"),
    (Reply(content='{"score": true, "reason": "x"}', finish="stop"), None, "no score from 1 to 5"),
    (Reply(content='{"score": 3', finish="length"), None, "cut at"),
    (Reply(content="not json", finish="stop"), None, "not JSON"),
    (Reply(error="the server answered 400: bad"), None, "answered 400")])
def test_verdicts_are_parsed_or_say_why_not(reply, score, problem):
    verdict = parse_verdict(reply)
    assert verdict.score == score and problem in verdict.error
    if score:
        assert verdict.reason == "Mostly right."


def _targets(lora=False):
    ep = Endpoint("http://127.0.0.1:9", "tiny", api_key="s3cret")
    base = Target("base", ep, "srv", "/models/tiny", lora_server=lora)
    tuned = Target("tuned", Endpoint(ep.url, "qa", "s3cret"), "srv", "/models/tiny", lora_server=lora)
    return EvalTargets(base, tuned)


def test_lm_eval_command_keeps_the_key_out_of_argv(tmp_path):
    targets = _targets()
    options = HarnessOptions(tasks=["ceval-valid", "cmmlu"], include_path="/tasks", limit=5)
    argv = harness_argv(targets.tuned, options, tmp_path / "out")
    assert argv[1:4] == ["run", "--model", "local-completions"] and "s3cret" not in " ".join(argv)
    args = argv[argv.index("--model_args") + 1]
    assert "base_url=http://127.0.0.1:9/v1/completions" in args and "model=qa" in args
    assert "tokenizer=/models/tiny" in args and "tokenized_requests=False" in args
    assert argv[argv.index("--tasks") + 1] == "ceval-valid,cmmlu" and "--include_path" in argv and "--limit" in argv
    assert harness_env(targets.tuned)["OPENAI_API_KEY"] == "s3cret"
    chat = harness_argv(targets.tuned, HarnessOptions(tasks=["t"], api="chat"), tmp_path / "out")
    assert "local-chat-completions" in chat and "--apply_chat_template" in chat


def test_lm_eval_results_are_read_per_task_and_metric(tmp_path):
    out = tmp_path / "out" / "model"
    out.mkdir(parents=True)
    (out / "results_2026.json").write_text(json.dumps({"results": {"devtune_mini": {
        "alias": "devtune_mini", "acc,none": 0.5, "acc_stderr,none": 0.2, "acc_norm,none": 0.75, "sample_len": 4}}}))
    assert read_results(tmp_path / "out") == {"devtune_mini": {"acc": 0.5, "acc_norm": 0.75}}
    assert read_results(tmp_path / "nothing") == {}


def test_lm_eval_refuses_vllm_cpus_lora_path_for_choices():
    lora = _targets(lora=True)
    assert "LoRA enabled" in lora_refusal(lora, HarnessOptions(tasks=["t"]), cpu_build=True)
    assert lora_refusal(lora, HarnessOptions(tasks=["t"], api="chat"), cpu_build=True) is None
    assert lora_refusal(lora, HarnessOptions(tasks=["t"]), cpu_build=False) is None
    assert lora_refusal(_targets(), HarnessOptions(tasks=["t"]), cpu_build=True) is None


def test_without_servers_the_error_says_what_to_start(workspace):
    with pytest.raises(EvalInputError, match="no training runs .* start one with `devtune train`"):
        resolve_targets(workspace)  # the serve plan's answer: no run to serve with --lora yet
    with pytest.raises(EvalInputError, match="name both --base-server and --tuned-server"):
        resolve_targets(workspace, base_server="x")
    with pytest.raises(EvalInputError, match="neither a training run nor a merged model"):
        resolve_targets(workspace, "no-such-run")


def test_the_cli_without_a_server_exits_2(workspace, devtune_cli):
    _dataset(workspace)
    proc = devtune_cli("-w", str(workspace.root), "eval", "--dataset", "qa")
    assert proc.returncode == 2 and "start one with `devtune train`" in proc.stderr
    proc = devtune_cli("-w", str(workspace.root), "eval", "--dataset", "qa", "--judge-url", "http://x")
    assert proc.returncode == 2 and "--judge-model" in proc.stderr
