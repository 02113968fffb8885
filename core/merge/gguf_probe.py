"""Measurements on a GGUF and on the merged model it came from, each in the environment that has its
library, run as `python -m core.merge.gguf_probe ...` from the repository root (JSON after a marker on
stdout), so that devtune itself imports neither llama.cpp nor torch:

- `metadata GGUF` (llama.cpp's environment, `.venv-gguf`: the `gguf` package's GGUFReader): the embedded
  chat template, the tokenizer's bos/eos tokens, the architecture and the file type;
- `quantize SRC DST TYPE` (`.venv-gguf`: `llama_cpp.llama_model_quantize`): a k-quant from an f16 GGUF;
- `hf-answers MERGED REQUESTS` (the training environment, `.venv`: transformers): the merged model's greedy
  answer to each prompt, as token ids, with the prompt's ids;
- `gguf-answers GGUF REQUESTS` (`.venv-gguf`: llama-cpp-python): the same prompts tokenized by the GGUF's own
  vocabulary, the greedy answers, and, fed the merged model's answer token by token (teacher forcing), llama.cpp's
  top token at each step.

REQUESTS is a JSON file: {"prompts": [...], "max_new_tokens": N} (+ "reference": [[ids]...], "stop": [ids] for
gguf-answers). Only the standard library is imported at module level.
"""

from __future__ import annotations

import json
import sys

MARKER = "@@devtune-json@@"
# llama.cpp's file types by name (enum llama_ftype, llama.h): what `quantize` may be asked for
FTYPES = {"q8_0": 7, "q4_k_m": 15, "q5_k_m": 17, "f16": 1, "bf16": 32}


def metadata(path: str) -> dict:
    from gguf import GGUFReader

    reader = GGUFReader(path)

    def field(name: str):
        f = reader.fields.get(name)
        if f is None or not f.data:
            return None
        return f.contents()

    tokens = reader.fields.get("tokenizer.ggml.tokens")

    def token(key: str) -> str:
        index = field(key)
        if index is None or tokens is None:
            return ""
        return str(tokens.contents(int(index)))

    return {"chat_template": field("tokenizer.chat_template"), "architecture": field("general.architecture"),
            "file_type": field("general.file_type"), "bos_token": token("tokenizer.ggml.bos_token_id"),
            "eos_token": token("tokenizer.ggml.eos_token_id"),
            "add_bos": field("tokenizer.ggml.add_bos_token"), "tensors": len(reader.tensors)}


def quantize(src: str, dst: str, kind: str) -> dict:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[kind]
    code = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), params)
    if code != 0:
        raise RuntimeError(f"llama_model_quantize returned {code}")
    return {"ok": True}


def hf_answers(merged: str, requests: dict) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(merged)
    model = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32)
    model.eval()
    eos = model.generation_config.eos_token_id
    stop = sorted({eos} if isinstance(eos, int) else set(eos or [])) or [tokenizer.eos_token_id]
    out = []
    for prompt in requests["prompts"]:
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            generated = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                       do_sample=False, max_new_tokens=requests["max_new_tokens"],
                                       eos_token_id=stop, pad_token_id=stop[0])
        answer = generated[0, len(ids):].tolist()
        while answer and answer[-1] in stop:
            answer = answer[:-1]
        out.append({"prompt_ids": ids, "answer_ids": answer,
                    "answer": tokenizer.decode(answer, skip_special_tokens=True)})
    return {"answers": out, "stop": stop}


def gguf_answers(path: str, requests: dict) -> dict:
    import llama_cpp
    import numpy as np

    max_new = requests["max_new_tokens"]
    stop = set(requests.get("stop") or [])
    longest = max((len(p.encode()) for p in requests["prompts"]), default=0)
    llm = llama_cpp.Llama(model_path=path, n_ctx=max(512, longest + 2 * max_new + 64), logits_all=True,
                          n_threads=1, n_batch=512, seed=0, verbose=False)
    stop |= {llm.token_eos()}
    out = []
    for i, prompt in enumerate(requests["prompts"]):
        ids = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        answer: list[int] = []
        while len(answer) < max_new:
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            if nxt in stop:
                break
            answer.append(nxt)
            llm.eval([nxt])
        forced: list[int] = []
        reference = (requests.get("reference") or [None] * (i + 1))[i]
        if reference is not None:  # the merged model's answer fed in: llama.cpp's top token at each step
            llm.reset()
            llm.eval(ids + list(reference))
            forced = [int(np.argmax(llm.scores[len(ids) - 1 + k])) for k in range(len(reference))]
        out.append({"prompt_ids": ids, "answer_ids": answer, "forced_top": forced,
                    "answer": llm.detokenize(answer).decode("utf-8", errors="replace")})
    return {"answers": out}


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "metadata":
        result = metadata(argv[1])
    elif len(argv) == 4 and argv[0] == "quantize" and argv[3] in FTYPES:
        result = quantize(argv[1], argv[2], argv[3])
    elif len(argv) == 3 and argv[0] in ("hf-answers", "gguf-answers"):
        with open(argv[2], encoding="utf-8") as f:
            requests = json.load(f)
        result = (hf_answers if argv[0] == "hf-answers" else gguf_answers)(argv[1], requests)
    else:
        print("usage: python -m core.merge.gguf_probe metadata GGUF | quantize SRC DST TYPE | "
              "hf-answers MERGED REQUESTS | gguf-answers GGUF REQUESTS", file=sys.stderr)
        return 2
    sys.stdout.write(MARKER + json.dumps(result, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
