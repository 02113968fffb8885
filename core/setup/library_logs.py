"""Keep libraries' own chatter out of devtune's output (its stdout, stderr and the wizard), using each
library's own logging settings, for the work devtune does in its own process (building the tiny model):

- DeepSpeed, imported by accelerate when transformers loads a model class, logs "[WARNING] Setting
  accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it." to stdout on
  any machine without a GPU. Its logger ("DeepSpeed") sets its own level when it is created, so a filter
  on that logger lets through errors only; a real DeepSpeed problem in training is in the run's logs.
- transformers: verbosity "error" and no progress bars ("Writing model shards: 100%|███|") unless the
  person asked for them (TRANSFORMERS_VERBOSITY / HF_HUB_DISABLE_PROGRESS_BARS already set), through the
  libraries' own functions, never the environment: training, export and serving run in their own processes
  with their own logs (the Merge step reads the export's progress bars), and nothing here reaches them.
"""

from __future__ import annotations

import logging
import os

DEEPSPEED_LOGGER = "DeepSpeed"


def _errors_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR


def quiet_library_logs() -> None:
    """Call before loading a model class in devtune's own process (it imports transformers' logging). Idempotent."""
    logger = logging.getLogger(DEEPSPEED_LOGGER)
    if _errors_only not in logger.filters:
        logger.addFilter(_errors_only)
    from transformers.utils import logging as hf_logging

    if "TRANSFORMERS_VERBOSITY" not in os.environ:
        hf_logging.set_verbosity_error()
    if "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ:
        hf_logging.disable_progress_bar()
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
