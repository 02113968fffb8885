"""Failure rules of `devtune diagnose` for the steps after training: export and merge (`llamafactory-cli
export`, what `devtune merge` runs) and serving (vLLM). See core/train/failure_rules.py for what a rule's
fields mean; sources of the error texts: tests/fixtures/logs/SOURCES.md.
"""

from __future__ import annotations

from core.i18n import _
from core.train.failure_rule import Rule


def export_serve_rules() -> list[Rule]:
    return [
        # ---- export and merge
        Rule("export-dir-missing", (r"Please specify `export_dir` to save model",),
             _("The export YAML has no export_dir"),
             _("llamafactory-cli export needs export_dir, the folder the merged model is written to."),
             _("Add export_dir: exports/NAME to the merge YAML; devtune merge RUN writes a complete one."),
             ("devtune merge RUN",), weight=99),
        Rule("adapter-not-found", (r"Can't find '?adapter_config\.json'? at '[^']*'",),
             _("adapter_name_or_path holds no adapter"),
             _("The folder named as the adapter has no adapter_config.json: a wrong path, a run that ended before "
               "its first save, or a full or freeze run (those save a whole model, not an adapter)."),
             _("Point adapter_name_or_path at the LoRA run's output_dir (or one of its checkpoint-N folders) with "
               "adapter_config.json in it; a full run's folder is a model: set it as model_name_or_path and drop "
               "adapter_name_or_path."), ("ls saves/*/adapter_config.json saves/*/checkpoint-*/adapter_config.json",),
             weight=97),
        Rule("export-quantized-merge", (r"Cannot merge adapters to a quantized model",),
             _("An adapter cannot be merged into a quantized model"),
             _("The merge YAML loads the base model quantized (quantization_bit, or a GPTQ/AWQ/bnb checkpoint) and "
               "asks to merge the adapter into it; LLaMA-Factory merges only into 16-bit weights."),
             _("Remove quantization_bit from the merge YAML and merge the (Q)LoRA adapter onto the unquantized base "
               "model; to get a quantized model, quantize the merged folder afterwards (export_quantization_bit)."),
             ("devtune merge RUN",), weight=99),
        Rule("export-quantize-unmerged", (r"Please merge adapters before quantizing the model",),
             _("Merging and quantizing were asked in one export"),
             _("export_quantization_bit quantizes a whole model; with adapter_name_or_path set, the adapter has to "
               "be merged first."),
             _("Export twice: first merge (no export_quantization_bit), then quantize the merged folder "
               "(model_name_or_path: the merged folder, export_quantization_bit, no adapter)."), weight=99),
        Rule("export-quantization-dataset", (r"Quantization dataset is necessary for exporting",),
             _("Quantizing on export needs a calibration dataset"),
             _("export_quantization_bit (GPTQ) calibrates on sample texts, named by export_quantization_dataset."),
             _("Set export_quantization_dataset to a JSON file of texts (LLaMA-Factory's data/c4_demo.jsonl, or "
               "your own training data), or drop export_quantization_bit."), weight=99),
        Rule("export-size-invalid", (r"Could not parse the size value from '[^']*'",),
             _("export_size is not a whole number of GB"),
             _("LLaMA-Factory appends GB itself (max_shard_size = export_size + \"GB\"), so export_size takes a number "
               "such as 5, not \"5GB\"."),
             _("Write export_size: 5 (or devtune merge --size 5)."), weight=98),
        Rule("bitsandbytes-missing",
             (r"'bitsandbytes[^']*' distribution was not found", r"No package metadata was found for bitsandbytes"),
             _("bitsandbytes is not installed"),
             _("quantization_bit loads the model in 4 or 8 bits through bitsandbytes, which is not installed in this "
               "environment. In a merge YAML quantization_bit is wrong anyway: adapters merge into 16-bit weights."),
             _("For a merge, remove quantization_bit (devtune merge writes it without); for QLoRA training install "
               "bitsandbytes (ROCm: 0.50 or newer), or train without quantization_bit."),
             ("pip install -U 'bitsandbytes>=0.50.0'",), weight=95),
        # ---- serving (vLLM)
        Rule("vllm-kv-cache-too-small",
             (r"larger than the maximum number of tokens that can be stored in KV cache",
              r"which is larger than the available KV cache memory", r"No available memory for the cache blocks"),
             _("vLLM has no room for the context length"),
             _("After loading the weights, the GPU memory vLLM may use holds fewer tokens of KV cache than "
               "max_model_len."),
             _("Lower --max-model-len, raise --gpu-memory-utilization (up to 0.95), or use more GPUs with "
               "--tensor-parallel-size."), weight=94),
        Rule("chat-template-missing",
             (r"default chat template is no longer allowed", r"Cannot use chat template functions because "
              r"tokenizer\.chat_template is not set"),
             _("The tokenizer has no chat template"),
             _("The merged model's tokenizer does not carry a chat template, so the server cannot turn messages "
               "into a prompt."),
             _("Serve with the training template: devtune serve passes LLaMA-Factory's template as "
               "--chat-template; or export with the template set in the merge YAML."), weight=92),
        Rule("tokenizer-not-loadable",
             (r"Couldn't instantiate the backend tokenizer from one of", r"Can't load tokenizer for '[^']+'"),
             _("The model folder's tokenizer cannot be loaded"),
             _("The folder has no usable tokenizer: tokenizer.json and tokenizer_config.json are missing (an export "
               "that did not write them, a copy of the weights only), or only a slow tokenizer is there and "
               "sentencepiece or tiktoken is not installed to convert it."),
             _("Copy the tokenizer files of the base model into the folder, or export again with devtune merge (it "
               "writes the tokenizer with the weights); for a slow tokenizer install sentencepiece."),
             ("ls MODEL_DIR", "cp BASE_MODEL/tokenizer* BASE_MODEL/special_tokens_map.json MODEL_DIR/"), weight=94),
        Rule("vllm-gpu-memory-utilization",
             (r"Free memory on device \S* ?\([\d.]+/[\d.]+ GiB\) on startup is less than desired GPU memory "
              r"utilization",),
             _("vLLM cannot take the share of GPU memory it was told to"),
             _("--gpu-memory-utilization (0.9 by default) asks for that share of the whole GPU at start, and other "
               "processes (a training run, another server) already hold more than the rest."),
             _("Stop what else uses the GPU (nvidia-smi / amd-smi show it), or lower --gpu-memory-utilization to fit "
               "the free memory, together with --max-model-len."),
             ("nvidia-smi --query-compute-apps=pid,used_memory --format=csv", "amd-smi process"), weight=95),
        Rule("vllm-max-model-len",
             (r"User-specified max_model_len \(\d+\) is greater than the derived max_model_len",),
             _("--max-model-len is longer than the model's context"),
             _("vLLM refuses a max_model_len above the model's max_position_embeddings (from its config.json): the "
               "model was not trained for longer positions."),
             _("Lower --max-model-len to the model's context length (the error names it), or serve a model with a "
               "longer context; VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 overrides at your own risk."), weight=96),
    ]
