"""Log lines cannot be forged through what outsiders send, in text or JSON."""

from __future__ import annotations

import io
import json
import logging

import pytest

from agent_team.common.log_format import (
    JsonFormatter,
    SafeFormatter,
    escape_controls,
    formatter_for,
)
from agent_team.common.redact import redact
from agent_team.config import load_settings

FORGED = (
    "title\n2026-12-04 10:00:00,000 ERROR agent_team.service.daemon: the ledger is gone"
    "\x1b[2J\u202e"
)


def _logged(formatter: logging.Formatter, *, exc: bool = False) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger("agent_team.test_log_format")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        if exc:
            try:
                raise ValueError(FORGED)
            except ValueError:
                logger.exception("refused %s", FORGED)
        else:
            logger.warning("refused a request titled %s", FORGED)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_newline_in_a_message_does_not_start_a_record() -> None:
    text = _logged(SafeFormatter())
    assert text.count("\n") == 1  # one record, one line
    assert "\\n2026-12-04 10:00:00,000 ERROR" in text
    assert "\x1b" not in text and "\\x1b[2J" in text
    assert "\u202e" not in text and "\\u202e" in text


def test_a_traceback_is_indented_so_no_line_looks_like_a_record() -> None:
    lines = _logged(SafeFormatter(), exc=True).splitlines()
    assert " ERROR agent_team.test_log_format: refused title\\n" in lines[0]
    assert all(line.startswith("    ") for line in lines[1:]), lines
    assert not any(line.startswith("2026-12-04") for line in lines[1:])


def test_json_lines_are_one_object_each() -> None:
    for exc in (False, True):
        lines = _logged(JsonFormatter(), exc=exc).splitlines()
        assert len(lines) == 1
        entry = json.loads(lines[0])
        assert entry["level"] == ("error" if exc else "warning")
        assert FORGED in entry["message"]
        assert ("exception" in entry) is exc


@pytest.mark.parametrize(("value", "kind"), [("text", SafeFormatter), ("json", JsonFormatter)])
def test_the_setting_picks_the_format(value: str, kind: type[logging.Formatter]) -> None:
    settings = load_settings(log_format=value)
    assert isinstance(formatter_for(settings.log_format), kind)


def test_escape_controls_keeps_ordinary_text() -> None:
    assert (
        escape_controls("Grüße, 日本, émoji 🎉 and tabs\t") == "Grüße, 日本, émoji 🎉 and tabs\\t"
    )


def test_every_part_of_a_json_line_is_redacted_the_stack_too() -> None:
    """A secret in a local that a stack dump shows is as much a secret as one in a message."""
    key = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example access key id
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("agent_team.test_log_format.stack")
    logger.propagate = False
    logger.addHandler(handler)
    try:  # the stack quotes this line, the key in it
        logger.warning("using %s", "AKIAIOSFODNN7EXAMPLE", stack_info=True)
    finally:
        logger.removeHandler(handler)
    entry = json.loads(stream.getvalue())
    assert "stack" in entry and 'logger.warning("using %s", "[redacted]"' in entry["stack"]
    assert key not in stream.getvalue()
    assert entry["message"] == "using [redacted]"


def test_aws_access_key_ids_are_redacted_and_lookalikes_kept() -> None:
    key, temporary = "AKIA" + "IOSFODNN7EXAMPLE", "ASIA" + "Y34FZKBOKMUTVV7A"
    assert redact(f"id={key} and {temporary}") == "id=[redacted] and [redacted]"
    kept = "AKIASHORT, XAKIAIOSFODNN7EXAMPLEX, akiaiosfodnn7example"
    assert redact(kept) == kept


def test_our_own_keys_are_redacted_wherever_they_are_pasted() -> None:
    key = "atk_" + "k3y1d0000000" + "_" + "S" * 43
    assert redact(f"note: my key is {key}, oops") == "note: my key is [redacted], oops"
    assert redact(f"/api/tasks?{key}=1") == "/api/tasks?[redacted]=1"
    assert redact("atk_short_thing") == "atk_short_thing"


def test_an_access_line_carries_its_fields_in_json_redacted() -> None:
    """The access log's parts go under `http`, so a log store can query them by field."""
    token = "ghp_" + "b" * 36
    record = logging.LogRecord("agent_team.access", logging.INFO, __file__, 1, "GET /", (), None)
    record.http = {"method": "GET", "path": f"/x/{token}", "status": 200, "duration_ms": 1.5}
    entry = json.loads(JsonFormatter().format(record))
    assert entry["http"] == {
        "method": "GET",
        "path": "/x/[redacted]",
        "status": 200,
        "duration_ms": 1.5,
    }
    assert "http" not in json.loads(JsonFormatter().format(logging.makeLogRecord({"msg": "x"})))
