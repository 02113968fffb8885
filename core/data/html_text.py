"""HTML left in a row's text (a CMS or helpdesk export: `<p>`, `<br>`, `&nbsp;`, `&amp;`): found for lint's `html`
finding, turned into plain text by `fix --yes`. Only the tags of formatted text count (a `<` in `a < b` or in a
generic type is no tag); the text is rebuilt with the standard library's `html.parser`, entities decoded as
`html.unescape` does, block ends (`</p>`, `<br>`, `</li>`, `</tr>`) as line breaks."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_TAGS = ("p|br|div|span|b|i|u|s|strong|em|a|ul|ol|li|h[1-6]|img|table|tr|td|th|tbody|thead|font|hr|blockquote|pre"
         "|code|sup|sub|section|article|small|center|strike|del|ins|mark|figure|figcaption|iframe|script|style")
HTML_RE = re.compile(rf"</?(?:{_TAGS})(?:\s[^<>]*)?/?>|&(?:[a-zA-Z]{{2,8}}|#[0-9]{{2,7}}|#[xX][0-9a-fA-F]{{2,6}});",
                     re.IGNORECASE)
HTML_HINT = re.compile(HTML_RE.pattern.encode(), re.IGNORECASE)  # the same, over a block's bytes (lint's hints)
_BREAKS = {"br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "hr", "table",
           "ul", "ol", "section", "article", "figure"}
_DROPPED = {"script", "style"}


def html_remnants(text: str, limit: int = 3) -> list[str]:
    """The first tags or entities in `text` (empty when there are none)."""
    if "<" not in text and "&" not in text:
        return []
    found: list[str] = []
    for m in HTML_RE.finditer(text):
        if m.group() not in found:
            found.append(m.group())
            if len(found) >= limit:
                break
    return found


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.dropping = 0

    def handle_starttag(self, tag, attrs):
        if tag in _DROPPED:
            self.dropping += 1
        elif tag == "br" or tag == "hr":
            self.parts.append("\n")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in _BREAKS:
            self.parts.append("\n")

    def handle_startendtag(self, tag, attrs):
        if tag in ("br", "hr"):
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in _DROPPED:
            self.dropping = max(0, self.dropping - 1)
        elif tag in _BREAKS and tag != "li":
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append("\t")

    def handle_data(self, data):
        if not self.dropping:
            self.parts.append(data)


def strip_html(text: str) -> str:
    """`text` as plain text: tags out (script/style with their content), entities decoded, `&nbsp;` a space,
    block ends as line breaks, at most one blank line in a row. Text without HTML is returned as it is."""
    if not html_remnants(text, 1):
        return text
    parser = _Text()
    parser.feed(text)
    parser.close()
    out = "".join(parser.parts).replace("\u00a0", " ")
    out = re.sub(r"[ \t]+\n", "\n", out)
    out = re.sub(r"\n[ \t]+(?!- )", "\n", out)
    out = re.sub(r"\n{3,}", "\n\n", out)
    return out.strip()
