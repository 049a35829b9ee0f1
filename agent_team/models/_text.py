"""Line and sentence helpers shared by `Plan.from_text` and the offline model.

Both read human-written text the same way (what a bullet is, where a sentence
ends), so a plan typed into an `edit` answer and an issue body given to the
offline model turn into steps by one rule.
"""

from __future__ import annotations

import re

__all__ = ["bullet_item", "sentences", "words"]

# `-`, `*`, `+` or `•` bullets and `1.` / `1)` numbers, each followed by a space; an
# optional task-list box (`[ ]`, `[x]`) after the marker is dropped too.
_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,4}[.)])\s+(?:\[[ xX]\]\s+)?(?P<text>\S.*?)\s*$")
# A sentence ends at `.`, `!` or `?` followed by white space. Abbreviations such as
# "e.g." split too; for deciding steps that is an acceptable price for no dependencies.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def bullet_item(line: str) -> str | None:
    """The text of a bullet or numbered line, or None if the line is not one."""
    match = _BULLET.match(line)
    return match.group("text") if match else None


def sentences(text: str) -> list[str]:
    """The sentences of a text, white space collapsed, in order; none for blank text."""
    flat = " ".join(text.split())
    return [part.strip() for part in _SENTENCE_END.split(flat) if part.strip()]


def words(text: str) -> int:
    """How many white-space separated words a text has."""
    return len(text.split())
