"""Log lines nobody can forge: control characters escaped, or one JSON object a line.

Why: requests from outside put their text into our log messages (a Slack
body, a header, a task title). A newline in that text used to start a line
that looked like one of our own records (`... ERROR agent_team...`), and a
terminal escape could rewrite what an operator's terminal showed. Here every
message has its control characters, line and paragraph separators and bidi
overrides escaped (`\\n`, `\\x1b`, `\\u202e`), and a traceback's lines are
indented, so a record always starts at the start of a line and nowhere else.
`AGENT_TEAM_LOG_FORMAT=json` writes one JSON object per line instead.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime

from agent_team.common.redact import redact

__all__ = ["JsonFormatter", "SafeFormatter", "escape_controls", "formatter_for"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# C0 and C1 controls, DEL, line/paragraph separators, bidi embeddings/overrides/isolates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """`text` on one line, every character that could move or hide text made visible."""
    return _UNSAFE.sub(_escape, text)


class SafeFormatter(logging.Formatter):
    """The usual text format, with the message escaped and a traceback indented."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        # Built here rather than through `Formatter.format`, which reuses a traceback another
        # handler may have cached on the record, unindented.
        record.message = escape_controls(redact(record.getMessage()))
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        text = self.formatMessage(record)
        if record.exc_info:
            text += "\n" + _indented(self.formatException(record.exc_info))
        if record.stack_info:
            text += "\n" + _indented(self.formatStack(record.stack_info))
        return text


def _indented(text: str) -> str:
    return "\n".join("    " + escape_controls(redact(line)) for line in text.splitlines())


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, and the traceback if any; an
    access-log record adds its fields under `http`."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        fields = getattr(record, "http", None)
        if isinstance(fields, dict):  # the access log's parts, to query by field
            entry["http"] = {
                str(key): redact(value) if isinstance(value, str) else value
                for key, value in fields.items()
            }
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        if record.stack_info:
            entry["stack"] = redact(self.formatStack(record.stack_info))
        return json.dumps(entry, ensure_ascii=True)


def formatter_for(log_format: str) -> logging.Formatter:
    """`AGENT_TEAM_LOG_FORMAT`: `text` (escaped) or `json`."""
    return JsonFormatter() if log_format == "json" else SafeFormatter()
