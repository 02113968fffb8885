"""`devtune eval`: does the fine-tune pay off? The held-out questions and a sample of training questions asked to
the tuned model and to its base, every answer scored (chrF, BLEU, ROUGE-L, exact match; optionally a judge model),
and lm-evaluation-harness tasks for the general skills. Step 6's, after core.serve (whose servers and client it
uses) and core.data (whose dataset_info.json it reads).

questions (which rows) · targets (base and tuned: one vLLM server with the adapter as a LoRA module, or two) ·
ask (the answers, concurrently) · score (each answer against its reference) · judge (the optional judge model) ·
eval_report (the one object the CLI's text and JSON, the Markdown file and the wizard render) · harness
(lm-evaluation-harness) · compare (the whole evaluation, saved in .devtune/evals/<id>/).
"""
