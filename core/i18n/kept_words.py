"""KeptWords: a pydantic record whose text fields keep their words as data, to be shown in the reader's language.

A record saved to a file (an export check's findings) is often read by another process, in another language:
`devtune merge` run in English, the Merge step opened with `--lang zh`. A text field given a Said
(core.i18n.said) keeps its key and values in `words` beside the text, and a record read back has those fields
said again in the current language. A file from before (no `words`) loads as it was written.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from core.i18n import Said, reworded


class KeptWords(BaseModel):
    words: dict[str, dict] = Field(default_factory=dict)  # field name -> Said.to_data() of its text

    @model_validator(mode="before")
    @classmethod
    def _keep_words(cls, data: Any) -> Any:
        if isinstance(data, dict):
            kept = {k: v.to_data() for k, v in data.items() if isinstance(v, Said)}
            if kept:
                data = {**data, "words": {**(data.get("words") or {}), **kept}}
        return data

    @model_validator(mode="after")
    def _say_words(self):
        """Each kept field as a Said in the current language (so a record read from a file speaks the reader's
        language, and a Said handed on from it stays data)."""
        for name, data in self.words.items():
            value = self.__dict__.get(name)
            if isinstance(value, str) and not isinstance(value, Said):
                self.__dict__[name] = reworded(value, data)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name != "words" and name in type(self).model_fields:
            if isinstance(value, Said):
                self.words[name] = value.to_data()
            else:
                self.words.pop(name, None)
