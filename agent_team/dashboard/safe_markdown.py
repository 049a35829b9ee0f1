"""A small Markdown subset rendered to HTML that is safe for untrusted text.

Why not a Markdown library: plans quote issue text, which anyone who can
open an issue controls, and full Markdown passes raw HTML and `javascript:`
links through. Here every character of the input is escaped first and only
fixed tags without attributes are added around it, so no input can create
markup of its own. Supported: `#` headings, `-`/`*`/`+` and numbered lists,
fenced code blocks, paragraphs, inline `code`, **bold** and *italic*. Anything else
shows as the text it is.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

__all__ = ["render_markdown"]

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*\d{1,4}[.)]\s+(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
# Applied to already-escaped text: the patterns only ever wrap text in tags.
_CODE = re.compile(r"`([^`\n]+)`")
# A marked span is at most `_SPAN` characters: an unbounded lazy span makes a line that
# never closes cost time by the square of its length (a task body can be 64 KiB), and the
# regex engine holds the GIL, so one page view would stall every thread of the daemon.
_SPAN = 300
_BOLD = re.compile(rf"\*\*(?=\S)(.{{1,{_SPAN}}}?)(?<=\S)\*\*")
# One star each side, not touching a letter or another star (`2*3*4` stays as it is).
_ITALIC = re.compile(rf"(?<![*\w])\*(?=[^\s*])(.{{1,{_SPAN}}}?)(?<=[^\s*])\*(?![*\w])")
# Longer lines are shown as text: nobody writes emphasis into such a line by hand.
_MARKUP_LINE = 4000


def _inline(text: str) -> str:
    """Escape a line, then mark up `code` spans, **bold** and *italic* (not inside code)."""
    if len(text) > _MARKUP_LINE:
        return str(escape(text))
    parts = _CODE.split(str(escape(text)))
    out: list[str] = []
    for index, part in enumerate(parts):
        # split() puts the captured code spans at odd positions.
        if index % 2:
            out.append(f"<code>{part}</code>")
        else:
            out.append(_ITALIC.sub(r"<em>\1</em>", _BOLD.sub(r"<strong>\1</strong>", part)))
    return "".join(out)


def render_markdown(text: str, *, top_level: int = 3) -> Markup:
    """Render `text` as safe HTML.

    Args:
        text: untrusted Markdown.
        top_level: the HTML heading level a `#` heading becomes (the page
            already has its own `h1`/`h2`); deeper headings follow, up to `h6`.
    """
    html: list[str] = []
    paragraph: list[str] = []
    list_tag: str | None = None
    code: list[str] | None = None

    def close_paragraph() -> None:
        if paragraph:
            html.append("<p>" + "<br>".join(_inline(line) for line in paragraph) + "</p>")
            paragraph.clear()

    def close_list() -> None:
        nonlocal list_tag
        if list_tag is not None:
            html.append(f"</{list_tag}>")
            list_tag = None

    def open_list(tag: str) -> None:
        nonlocal list_tag
        if list_tag != tag:
            close_list()
            html.append(f"<{tag}>")
            list_tag = tag

    for line in text.replace("\r\n", "\n").split("\n"):
        if code is not None:
            if _FENCE.match(line):
                html.append("<pre><code>" + str(escape("\n".join(code))) + "</code></pre>")
                code = None
            else:
                code.append(line)
            continue
        if _FENCE.match(line):
            close_paragraph()
            close_list()
            code = []
            continue
        if not line.strip():
            close_paragraph()
            close_list()
            continue
        heading = _HEADING.match(line)
        bullet = _BULLET.match(line)
        item = bullet or _NUMBERED.match(line)
        if heading:
            close_paragraph()
            close_list()
            level = min(6, top_level + len(heading.group(1)) - 1)
            html.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif item:
            close_paragraph()
            open_list("ul" if bullet else "ol")
            html.append(f"<li>{_inline(item.group(1))}</li>")
        elif list_tag is not None and line[:1].isspace() and html[-1].endswith("</li>"):
            # An indented line right under an item continues that item.
            html[-1] = html[-1][: -len("</li>")] + " " + _inline(line.strip()) + "</li>"
        else:
            close_list()
            paragraph.append(line.strip())
    if code is not None:  # an unclosed fence still shows its text
        html.append("<pre><code>" + str(escape("\n".join(code))) + "</code></pre>")
    close_paragraph()
    close_list()
    return Markup("\n".join(html))
