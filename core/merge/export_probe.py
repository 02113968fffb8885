"""Measurements on a merged model that need the training stack, run in a subprocess of the training
environment's Python (`python -m core.merge.export_probe ...`, JSON on stdout), so that devtune itself never
imports torch, transformers or LLaMA-Factory:

- `lf-render TOKENIZER TEMPLATE`: the exact prompt text LLaMA-Factory's template builds for each
  probe conversation (`Template.encode_oneturn`, the same call its trainer and chat engine use),
  the Jinja template LLaMA-Factory would write for it, and its stop words;
- `logits BASE ADAPTER MERGED`: the logits of base + adapter (PEFT, unmerged) and of the merged
  model on one probe prompt, compared.
"""

from __future__ import annotations

import json
import sys

PROBE_PROMPT = "How do I reset my password? 退款多久到账？"


def lf_render(tokenizer_dir: str, template_name: str) -> dict:
    from llamafactory.data.template import get_template_and_fix_tokenizer
    from llamafactory.hparams import DataArguments
    from transformers import AutoTokenizer

    from core.merge.chat_template import PROBES

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, trust_remote_code=False)
    template = get_template_and_fix_tokenizer(tokenizer, DataArguments(template=template_name))
    prompts = {}
    for name, system, turns in PROBES:
        messages = list(turns) + [{"role": "assistant", "content": ""}]
        prompt_ids, _answer = template.encode_oneturn(tokenizer, messages, system or None)
        prompts[name] = tokenizer.decode(prompt_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    try:
        jinja = template._get_jinja_template(tokenizer)
    except Exception as exc:  # some templates cannot be written as Jinja
        jinja, note = None, f"{type(exc).__name__}: {exc}"
    else:
        note = ""
    stop_ids = template.get_stop_token_ids(tokenizer)
    return {"template": template_name, "prompts": prompts, "jinja": jinja, "jinja_note": note,
            "bos_token": tokenizer.bos_token or "", "eos_token": tokenizer.eos_token or "",
            "stop_tokens": tokenizer.convert_ids_to_tokens(stop_ids)}


def logits(base: str, adapter: str, merged: str) -> dict:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(merged)
    ids = tokenizer(PROBE_PROMPT, return_tensors="pt")["input_ids"]
    merged_model = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32)
    stored = str(getattr(merged_model.config, "dtype", None) or getattr(merged_model.config, "torch_dtype", ""))
    with torch.no_grad():
        after = merged_model(ids).logits.float()
    del merged_model
    base_model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    if base_model.get_input_embeddings().weight.shape[0] < after.shape[-1]:
        base_model.resize_token_embeddings(after.shape[-1])  # the template added a token (and the export kept it)
    model = PeftModel.from_pretrained(base_model, adapter)
    model.eval()
    with torch.no_grad():
        before = model(ids).logits.float()
    diff = (after - before).abs()
    return {"max_abs_diff": float(diff.max()), "max_abs_logit": float(before.abs().max()),
            "top1_agree": float((after.argmax(-1) == before.argmax(-1)).float().mean()),
            "tokens": int(ids.shape[-1]), "stored_dtype": stored.replace("torch.", "")}


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "lf-render":
        result = lf_render(argv[1], argv[2])
    elif len(argv) == 4 and argv[0] == "logits":
        result = logits(argv[1], argv[2], argv[3])
    else:
        print("usage: python -m core.merge.export_probe lf-render TOKENIZER TEMPLATE | logits BASE ADAPTER MERGED",
              file=sys.stderr)
        return 2
    sys.stdout.write("\n@@devtune-json@@" + json.dumps(result, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
