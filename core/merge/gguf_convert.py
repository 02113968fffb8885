"""llama.cpp's converter (convert_hf_to_gguf.py, from the llama-cpp-python source distribution that `make
gguf-env` unpacks into .venv-gguf/share/llama.cpp), run in the training environment, which has the torch and
transformers it needs: `python -m core.merge.gguf_convert CONVERTER MODEL_DIR --outfile F --outtype T`.

One thing is added to it. llama.cpp names a BPE tokenizer's pre-tokenizer from a hash of how a list of known
models tokenize a test string; a tokenizer trained for a model of one's own (devtune's tiny demo model, a
domain tokenizer) matches none, and the converter stops ("BPE pre-tokenizer was not recognized"). When the hash
is unknown, the pre-tokenizer is named from the tokenizer.json's own declaration instead, for the declarations
whose llama.cpp equivalent is exact (PRE_TOKENIZERS); any other stays the converter's refusal. The GGUF check
then proves it: the prompts' token ids from the GGUF's vocabulary must equal the merged tokenizer's.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

# tokenizer.json "pre_tokenizer" (the keys that decide the split) -> llama.cpp's tokenizer.ggml.pre
PRE_TOKENIZERS: tuple[tuple[dict, str], ...] = (
    ({"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}, "gpt-2"),  # GPT-2's regex, bytes
)


def declared_pre_tokenizer(model_dir: Path) -> str | None:
    """llama.cpp's name for the pre-tokenizer that the folder's tokenizer.json declares, when one fits exactly."""
    try:
        declared = json.loads((Path(model_dir) / "tokenizer.json").read_text(encoding="utf-8")).get("pre_tokenizer")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(declared, dict):
        return None
    for keys, name in PRE_TOKENIZERS:
        if all(declared.get(k) == v for k, v in keys.items()):
            return name
    return None


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m core.merge.gguf_convert CONVERTER MODEL_DIR [converter options]", file=sys.stderr)
        return 2
    converter = Path(argv[0]).resolve()
    sys.path.insert(0, str(converter.parent))
    sys.path.insert(1, str(converter.parent / "gguf-py"))
    from conversion.base import TextModel  # the converter's own package, beside it

    known = TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer) -> str:
        try:
            return known(self, tokenizer)
        except NotImplementedError:
            name = declared_pre_tokenizer(self.dir_model)
            if name is None:
                raise
            print(f"devtune: pre-tokenizer not in llama.cpp's list; tokenizer.json declares {name!r}",
                  file=sys.stderr)
            return name

    TextModel.get_vocab_base_pre = get_vocab_base_pre
    sys.argv = [str(converter), *argv[1:]]
    runpy.run_path(str(converter), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
