"""A failed Actions job's log, cut to what a person needs to see, with no secret in it.

The CI gate (issue #29) asks a person about a red check with a short excerpt of
its log, and the flakiness test reads the log for timeouts and network errors.
GitHub answers `GET actions/jobs/{id}/logs` with a 302 to a pre-signed URL on
another host; `GitHubClient` never follows redirects (the token goes with
every request it makes), so the log is fetched here with a plain client that
carries no `Authorization`, and read only up to a byte limit: a log can run to
hundreds of megabytes. Whatever goes wrong, the caller gets an empty excerpt
and a reason, never an exception: a missing log must not stop the watcher.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from agent_team import __version__
from agent_team.integrations.github.intake import GitHubClient, GitHubError

__all__ = [
    "ERROR_PATTERNS",
    "FLAKY_PATTERNS",
    "JobLogs",
    "LogExcerpt",
    "excerpt_of",
    "flaky_pattern",
]

# Lines that look like the failure itself; the excerpt starts a little before the first.
ERROR_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"##\[error\]"),  # what Actions prints for a failed step
    re.compile(r"^E\s{2,}\S"),  # pytest's failure lines
    re.compile(r"\b(?:error|Error|ERROR)(?:\[\w+\])?:"),  # `Error:`, rustc's `error[E0425]:`
    re.compile(r"^(?:FAILED|FAIL)\b"),
    re.compile(r"Traceback \(most recent call last\)"),
    re.compile(r"\bnpm ERR!"),
    re.compile(r"^(?:fatal|panic):"),
    re.compile(r"\bexit (?:code|status) [1-9]"),
)

# A failure these name is likely the network's or the runner's, not the change's.
FLAKY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a timeout", re.compile(r"(?i)\btimed out\b|\bi/o timeout\b|TLS handshake timeout")),
    ("a timeout", re.compile(r"\b(?:ConnectTimeout|ReadTimeout|ReadTimeoutError)\b")),
    ("ETIMEDOUT", re.compile(r"\bETIMEDOUT\b")),
    ("ECONNRESET", re.compile(r"\bECONNRESET\b")),
    ("ECONNREFUSED", re.compile(r"\bECONNREFUSED\b")),
    ("a connection reset", re.compile(r"(?i)\bconnection (?:reset|aborted)\b")),
    (
        "a DNS failure",
        re.compile(
            r"(?i)could not resolve host|temporary failure in name resolution"
            r"|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)"
        ),
    ),
    (
        "a 502/503/504 from a server",
        re.compile(
            r"(?i)\b50[234] (?:bad gateway|service unavailable|gateway time-?out)\b"
            r"|\b(?:HTTP|status|code)\D{0,8}50[234]\b"
        ),
    ),
    ("a rate limit", re.compile(r"(?i)\b429 Too Many Requests\b|\brate limit exceeded\b")),
    ("a cancelled operation", re.compile(r"The operation was canceled")),
    (
        "a lost runner",
        re.compile(r"(?i)lost communication with the server|runner has received a shutdown signal"),
    ),
)

_TIMESTAMP = re.compile(r"^\ufeff?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?")  # Actions' prefix
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BEFORE = 5  # lines of context kept above the first error-looking line


@dataclass(frozen=True, slots=True)
class LogExcerpt:
    """What a person is shown of a failed job's log."""

    text: str  # redacted; empty when the log could not be read
    reason: str | None = None  # why `text` is empty (or cut short); None: read whole
    flaky: str | None = None  # the first FLAKY_PATTERNS name found anywhere in what was read


def flaky_pattern(text: str) -> str | None:
    """The name of the first flaky-looking pattern `text` holds, or None."""
    for name, pattern in FLAKY_PATTERNS:
        if pattern.search(text):
            return name
    return None


def excerpt_of(
    text: str, *, max_lines: int = 40, max_chars: int = 4000, clean: Callable[[str], str]
) -> str:
    """Up to `max_lines` lines starting just above the first error-looking line (the
    last lines when none looks like one), passed through `clean`, then cut to `max_chars`.

    Redaction comes before the cut so a token split by it cannot slip past the patterns.
    """
    lines = [_ANSI.sub("", _TIMESTAMP.sub("", line)).rstrip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    first = next(
        (i for i, line in enumerate(lines) if any(p.search(line) for p in ERROR_PATTERNS)), None
    )
    if first is None:
        window = lines[-max_lines:] if max_lines > 0 else []
    else:
        start = max(0, min(first - _BEFORE, len(lines) - max_lines))
        window = lines[start : start + max_lines]
    shown = clean("\n".join(window))
    if len(shown) <= max_chars:
        return shown
    cut = shown[: max(max_chars - 1, 0)]
    if "\n" in cut:
        cut = cut.rpartition("\n")[0]  # whole lines when there is room for one
    return cut + "…"


class _Unavailable(Exception):
    """The log cannot be read; the message is the reason shown instead of it."""


class JobLogs:
    """Fetches job logs through GitHub's redirect, bounded, without the token.

    Args:
        client: the daemon's `GitHubClient` (for the API call and its redaction).
        transport: an httpx transport for the log host (tests); None for the network.
        max_bytes: read no more of a log than this.
    """

    def __init__(
        self,
        client: GitHubClient,
        *,
        transport: httpx.BaseTransport | None = None,
        max_bytes: int = 1_000_000,
        timeout_s: float = 20.0,
    ) -> None:
        self.client = client
        self.max_bytes = max_bytes
        self._transport = transport
        self._timeout_s = timeout_s

    def excerpt(
        self, repo: str, job_id: int, *, max_lines: int = 40, max_chars: int = 4000
    ) -> LogExcerpt:
        """The excerpt of job `job_id`'s log; an empty one with the reason when unreadable."""
        try:
            text, cut = self._read(repo, job_id)
        except _Unavailable as exc:
            return LogExcerpt("", self.client.clean(str(exc)))
        shown = excerpt_of(text, max_lines=max_lines, max_chars=max_chars, clean=self.client.clean)
        reason = f"the log is longer than {self.max_bytes} bytes; read that much" if cut else None
        return LogExcerpt(shown, reason, flaky_pattern(text))

    def _read(self, repo: str, job_id: int) -> tuple[str, bool]:
        """The log's text (at most `max_bytes` of it) and whether it was cut."""
        try:
            response = self.client.request("GET", f"repos/{repo}/actions/jobs/{job_id}/logs")
        except GitHubError as exc:
            raise _Unavailable(str(exc)) from None
        status = response.status_code
        if status == 200:  # served in place (not GitHub.com's way, but harmless)
            return self._bounded([response.content])
        if status in (404, 410):
            raise _Unavailable(
                f"GitHub has no log for job {job_id} in {repo} "
                "(logs expire, and a job that never ran has none)"
            )
        if status not in (301, 302, 303, 307, 308) or not response.headers.get("location"):
            raise _Unavailable(self.client.describe(response))
        try:
            target = response.url.join(response.headers["location"])
        except httpx.InvalidURL:
            raise _Unavailable(f"GitHub sent a malformed log location for job {job_id}") from None
        if target.scheme not in ("http", "https"):
            raise _Unavailable(f"GitHub sent a {target.scheme!r} log location for job {job_id}")
        return self._download(target, job_id)

    def _download(self, target: httpx.URL, job_id: int) -> tuple[str, bool]:
        # The URL is pre-signed: it is the credential, so it never goes into a reason.
        where = target.host
        try:
            with (
                httpx.Client(
                    transport=self._transport,
                    timeout=self._timeout_s,
                    follow_redirects=True,
                    max_redirects=3,
                    headers={"User-Agent": f"agent-team/{__version__}"},
                ) as plain,
                plain.stream("GET", target) as response,
            ):
                if response.status_code != 200:
                    raise _Unavailable(
                        f"the log host {where} answered {response.status_code} for job {job_id}"
                    )
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > self.max_bytes:
                        break
        except httpx.HTTPError as exc:
            raise _Unavailable(
                f"cannot read the log of job {job_id} from {where} ({type(exc).__name__})"
            ) from None
        return self._bounded(chunks)

    def _bounded(self, chunks: list[bytes]) -> tuple[str, bool]:
        data = b"".join(chunks)
        cut = len(data) > self.max_bytes
        text = data[: self.max_bytes].decode("utf-8", errors="replace")
        if cut:
            text = text.rpartition("\n")[0]  # a cut line could hold half a token
        return text, cut
