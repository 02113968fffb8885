"""The speaker tags of a chat log or Q&A text (用户：/客服：, Customer:/Agent:, Q:/A:, 问：/答：): what `convert`
parses, and what tells such a text from pre-training prose (a .txt file with no speaker tags and no chat-export
header lines, `core.data.transcripts.text_shape`, is read the way LLaMA-Factory reads it, one row of text per
line)."""

from __future__ import annotations

import re
from pathlib import Path

from core.data.encoding import EncodingGuess
from core.data.reader import iter_text_lines
from core.data.records import ReadNotes

TIME = re.compile(r"^\s*\[?\s*(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}[ T])?\d{1,2}:\d{2}(?::\d{2})?\s*\]?\s*")
USER_TAGS = r"用户|客户|顾客|买家|访客|会员|User|Customer|Client|Human|Visitor|Buyer"
AGENT_TAGS = r"客服|坐席|助手|商家|卖家|人工客服|机器人|Agent|Support|Assistant|Staff|Bot|Seller|AI"
CHAT = re.compile(rf"^(?:(?P<user>{USER_TAGS})|(?P<agent>{AGENT_TAGS}))[\w\-#. ]{{0,12}}?\s*[:：]\s*(?P<text>.*)$",
                  re.IGNORECASE)
QA = re.compile(r"^(?:(?P<user>Q|问|问题|Question)|(?P<agent>A|答|回答|答案|Answer))\s*[:：.、]\s*(?P<text>.*)$",
                re.IGNORECASE)
SAMPLE_LINES = 2000


def speaker_counts(path: str | Path, encoding: EncodingGuess) -> tuple[int, int]:
    """(chat lines, Q&A lines) among the first SAMPLE_LINES lines of a text file: tagged lines, or, when no
    line is tagged, the header lines of a chat export (`2024-03-01 10:02 张三`, `[12/31/23, 9:15 PM] Lena:`)."""
    chat, qa = tag_counts(path, encoding)
    if chat or qa:
        return chat, qa
    from core.data.transcripts.text_shape import text_transcript_lines

    return text_transcript_lines(Path(path), encoding), 0


def tag_counts(path: str | Path, encoding: EncodingGuess) -> tuple[int, int]:
    """(chat-log lines, Q&A lines) with speaker tags among the first SAMPLE_LINES lines of a text file."""
    chat = qa = 0
    for n, (_line, text) in enumerate(iter_text_lines(Path(path), encoding, ReadNotes())):
        body = TIME.sub("", text, count=1).strip()
        if QA.match(body):
            qa += 1
        elif CHAT.match(body):
            chat += 1
        if n >= SAMPLE_LINES:
            break
    return chat, qa
