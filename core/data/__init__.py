"""Step 1, Data: read, lint, fix, convert, register and describe datasets for LLaMA-Factory."""
