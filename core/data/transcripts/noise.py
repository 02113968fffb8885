"""What a chat export holds that is no message: media placeholders (`[图片]`, `[表情]`, `<Media omitted>`,
`image omitted`, `[Sticker]`), inline emoji codes (`[微笑]`), recalls and system notices (`撤回了一条消息`,
`This message was deleted`, `end-to-end encrypted`, `加入了群聊`), and the speakers that only say such
things (`系统消息`). A notice line without a speaker is always a notice; these words judge the rest."""

from __future__ import annotations

import html
import re

_BRACKETED = r"[\[【〔<＜(（][^\[\]【】〔〕<>＜＞()（）\n]{1,16}[\]】〕>＞)）]"
PLACEHOLDER = re.compile(
    rf"^(?:{_BRACKETED}(?:\s+\S{{1,30}})?|\S+ omitted|<[^<>]{{1,40}} omitted>|<attached: [^<>]+>"
    r"|\(File not included[^)]*\))$", re.IGNORECASE)
INLINE_EMOJI = re.compile(r"\[[\u4e00-\u9fff]{1,4}\]")
NOTICE = re.compile(
    r"撤回了一条消息|撤回了一条|消息已撤回|recalled a message|unsent a message|This message was deleted"
    r"|You deleted this message|end-to-end encrypted|加入了群聊|退出了群聊|修改群名为|已成为你的好友"
    r"|以上是打招呼的内容|拍了拍|joined using this group's invite link|changed the group name"
    r"|changed the subject|changed this group's|created group|开启了朋友验证", re.IGNORECASE)
SYSTEM_SPEAKER = re.compile(r"^(?:系统消息|系统|系统通知|system|system message|notice)$", re.IGNORECASE)
_MARKS = re.compile("[\u200e\u200f\u202a-\u202e\ufeff]")
_HTML = re.compile(r"</?(?:p|div|br|span|b|i|a|ul|ol|li|h\d|strong|em|blockquote|pre|code)\b[^>]*>", re.IGNORECASE)


def clean_text(text: str) -> str:
    """A message's words: direction marks, HTML tags and entities, inline emoji codes and placeholder lines
    gone; '' when nothing else was said."""
    text = _MARKS.sub("", text)
    if _HTML.search(text):
        text = re.sub(r"<br\s*/?>|</p>|</div>|</li>", "\n", text, flags=re.IGNORECASE)
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
    kept = [INLINE_EMOJI.sub("", ln).strip() for ln in text.splitlines() if not PLACEHOLDER.match(ln.strip())]
    return "\n".join(ln for ln in kept if ln).strip()


def is_notice(text: str) -> bool:
    return NOTICE.search(_MARKS.sub("", text)) is not None


def is_system_speaker(name: str) -> bool:
    return SYSTEM_SPEAKER.match(name.strip()) is not None
