"""Question–answer pairs from business documents (`devtune data synth`).

documents (md, txt, html, docx, pptx, epub, xlsx, pdf → text with headings) → chunks (headings, numbered ones
too, first, then a token budget with overlap) → generate (questions, then a grounded answer per question, from any OpenAI-compatible server with
JSON-schema structured output; every request journaled, so a resumed run sends none twice) → filters (grounding,
duplicates, empty or truncated answers) → dataset (the alpaca JSONL, its rejects and its provenance, written
atomically). `pipeline.generate_pairs` composes a generation once, for the CLI and the wizard alike;
`outcome` holds what it gives back.
"""
