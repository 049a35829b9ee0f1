"""Every error agent-team raises on purpose, in one tree.

Each message says what went wrong *and what to do*, because it is shown to an
operator as one line with no traceback.

    AgentTeamError
    ├── ConfigError                 invalid settings (CLI exit code 2)
    │   └── DatabaseUnreachableError  AGENT_TEAM_DATABASE_URL cannot be connected to
    │                               at start (also a LedgerError)
    ├── LedgerError                 anything about the ledger database
    │   ├── SchemaTooNewError       the ledger was written by a newer agent-team
    │   ├── LedgerNotReadyError     a table or column the app needs is missing
    │   ├── LedgerBusyError         the database stayed locked past our retries
    │   ├── LedgerStorageError      the database driver failed (the driver's own
    │   │   │                       error, translated inside `db/`)
    │   │   ├── LedgerIntegrityError  a constraint refused a row; nothing stored
    │   │   ├── LedgerUnavailableError  the file cannot be used here (no access, a
    │   │   │                       read-only folder, another process's lock); the
    │   │   │                       ledger itself is fine
    │   │   └── LedgerCorruptError  PRAGMA quick_check found the file damaged
    │   ├── LedgerInUseError        another daemon already runs on this ledger
    │   ├── FencedError             a run's lease was taken over by another instance;
    │   │                           its writes are refused and the run stops
    │   └── LedgerInputError        bad input to a ledger call; nothing was stored
    │                               (also a ValueError)
    ├── TaskError                   a task cannot go on as asked
    │   ├── UnknownTaskError        no task / question with that id
    │   ├── InvalidAnswerError      an answer outside the question's grammar
    │   ├── QuestionClosedError     answering a question that is no longer open
    │   └── TaskRefusedError        a submission we will not run (e.g. a lane that is off)
    │       ├── TaskTooLargeError   a title or body over the task limits
    │       ├── IdempotencyKeyReusedError  an Idempotency-Key sent again with a different
    │       │                       request (HTTP 422); nothing was stored
    │       └── InvalidRepoError    a repository in a form we do not take, or a missing
    │                               path (CLI exit 2, HTTP 422; also a ValueError)
    ├── AccessDeniedError           a person's role is below what the action needs
    │                               (names the role; audited; CLI exit 3, HTTP 403)
    ├── SignInRefusedError          a Sign in with GitHub refused: a forged, expired or
    │                               spent state, GitHub refusing the code or failing, a
    │                               login no person holds (HTTP 400/403); nobody signed in
    ├── AutomationError             an automation request we cannot carry out
    │   ├── InvalidAutomationError  a bad field (names it; CLI exit 2, HTTP 422;
    │   │                           also a ValueError); nothing was stored
    │   └── UnknownAutomationError  no automation with that id or name
    ├── ParkingError                the task must wait for an operator or time;
    │   │                           `parked_reason` says which
    │   ├── BudgetExhaustedError    today's cap would be exceeded (or is reached, for a
    │   │                           priced build)
    │   ├── BuilderUnavailableError the configured builder cannot run here
    │   ├── ConfluenceRefusedError  a Confluence change we will not make (bad ADF,
    │   │                           missing page, wrong space, a guard refused)
    │   ├── ConfluenceError         Confluence failed (auth, errors after retries)
    │   ├── PublishFailedError      a finished build could not be pushed / its PR opened
    │   ├── RepoUnavailableError    a task's remote repository could not be fetched
    │   ├── ModelsDownError         every model a call may use failed with an error worth
    │   │                           retrying, retries spent; continues by itself later
    │   └── ModelRefusedError       a provider refused the call (401, 403, 400): a key or
    │                               a model setting to fix, then `retry`
    ├── ModelError                  a model call failed or returned unusable output
    │   └── ModelUnavailableError   the provider package (extra) is not installed
    ├── BuildError                  the builder ran and failed
    └── TaskStoppedError            a cancel or a limit stopped the task's running work;
                                    `reason` says which (`cancelled`, `task_timeout`,
                                    `budget`, or `shutdown`: the daemon stopped without
                                    waiting, nothing is recorded)

This module imports nothing of ours so that every layer, `db/` included, can
raise these without creating an import cycle.
"""

from __future__ import annotations

__all__ = [
    "AccessDeniedError",
    "AgentTeamError",
    "AutomationError",
    "BudgetExhaustedError",
    "BuildError",
    "BuilderUnavailableError",
    "ConfigError",
    "ConfluenceError",
    "ConfluenceRefusedError",
    "DatabaseUnreachableError",
    "FencedError",
    "IdempotencyKeyReusedError",
    "InvalidAnswerError",
    "InvalidAutomationError",
    "InvalidRepoError",
    "LedgerBusyError",
    "LedgerCorruptError",
    "LedgerError",
    "LedgerInUseError",
    "LedgerInputError",
    "LedgerIntegrityError",
    "LedgerNotReadyError",
    "LedgerStorageError",
    "LedgerUnavailableError",
    "ModelError",
    "ModelRefusedError",
    "ModelUnavailableError",
    "ModelsDownError",
    "ParkingError",
    "PublishFailedError",
    "QuestionClosedError",
    "RepoUnavailableError",
    "SchemaTooNewError",
    "SignInRefusedError",
    "TaskError",
    "TaskRefusedError",
    "TaskStoppedError",
    "TaskTooLargeError",
    "UnknownAutomationError",
    "UnknownTaskError",
]


class AgentTeamError(Exception):
    """Base of every error raised on purpose by agent-team."""


class ConfigError(AgentTeamError):
    """Settings failed validation; the message names the variable and what is allowed."""


class LedgerError(AgentTeamError):
    """A problem with the ledger database."""


class DatabaseUnreachableError(ConfigError, LedgerError):
    """The configured database cannot be connected to when the ledger is opened.

    A `ConfigError` too, so the CLI exits 2 at start: the URL (host, user,
    password, database) is what the operator must fix.
    """


class SchemaTooNewError(LedgerError):
    """The ledger's schema_version is newer than this code understands."""


class LedgerNotReadyError(LedgerError):
    """The ledger lacks a table or column the app needs (run `agent-team migrate`)."""


class LedgerBusyError(LedgerError):
    """A write could not get the database lock within the bounded retries."""


class LedgerStorageError(LedgerError):
    """The database driver raised; only `db/` sees driver errors, callers see this."""


class LedgerIntegrityError(LedgerStorageError):
    """A constraint (unique, check, foreign key) refused a write; the transaction rolled back."""


class LedgerUnavailableError(LedgerStorageError):
    """The ledger cannot be opened or written from here; nothing is wrong with the file.

    Its folder is read-only or not ours to write (SQLite's WAL files live beside
    the ledger), the file is not readable, or another process holds its lock.
    Never a reason to restore a backup.
    """


class LedgerCorruptError(LedgerStorageError):
    """The file is damaged, as `PRAGMA quick_check` confirms: restore a backup."""


class LedgerInUseError(LedgerError):
    """Another daemon already runs on this ledger (the message names its pid and address)."""


class FencedError(LedgerError):
    """A run's lease moved on to another instance: nothing of this write was stored.

    The run that gets it must stop without further side effects; the new
    owner carries the task on from its last checkpoint.
    """


class LedgerInputError(LedgerError, ValueError):
    """A ledger call got input it must refuse; the stored rows are unchanged."""


class TaskError(AgentTeamError):
    """A request about a task that cannot be carried out as asked."""


class UnknownTaskError(TaskError):
    """No task or question has the given id."""


class InvalidAnswerError(TaskError, ValueError):
    """An answer outside the question's grammar; the question stays open."""


class QuestionClosedError(TaskError):
    """The question was already answered, expired or superseded; nothing changed."""


class TaskRefusedError(TaskError):
    """A submission agent-team will not run, e.g. a lane that is turned off."""


class TaskTooLargeError(TaskRefusedError):
    """A title or body over the task limits (`agent_team.requests.limits`); nothing was stored."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class IdempotencyKeyReusedError(TaskRefusedError):
    """An `Idempotency-Key` that already names a different request; nothing was stored."""

    header = "Idempotency-Key"


class InvalidRepoError(TaskRefusedError, ValueError):
    """A repository we will not build in: not a form we take, or a path that is not there.

    Refused when the task is submitted (and an automation created), so nothing
    is stored; the message names the forms we take (`agent_team.common.repo_spec`).
    """


class AccessDeniedError(AgentTeamError):
    """Who asked may not do this; the message names the role the action needs."""

    def __init__(self, message: str, *, needed: str) -> None:
        super().__init__(message)
        self.needed = needed


class SignInRefusedError(AgentTeamError):
    """A sign-in with GitHub that did not sign anyone in; `status` is the HTTP answer (400
    for a bad state or GitHub's refusal, 403 for a login no person holds). The message is
    shown on the page: it never holds the client secret, the code, the state or a token."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class AutomationError(AgentTeamError):
    """An automation request we cannot carry out."""


class InvalidAutomationError(AutomationError, ValueError):
    """A bad field of an automation; `field` names it. Nothing was stored."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class UnknownAutomationError(AutomationError):
    """No automation with that id or name."""


class ParkingError(AgentTeamError):
    """The task must wait; `parked_reason` is stored on the task row."""

    parked_reason = "parked"


class PublishFailedError(ParkingError):
    """The build stands, but pushing it or opening its pull request failed.

    Parked rather than failed: once the token or remote is fixed, `agent-team
    retry` publishes the recorded build without building again.
    """

    parked_reason = "publish_failed"


class RepoUnavailableError(ParkingError):
    """A task's remote repository could not be fetched (gone, unreachable, access refused).

    Parked rather than failed: the plan is approved and kept in the checkpoint,
    so once the repository (or the token) is back, `agent-team retry` builds.
    The message carries git's own words, redacted.
    """

    parked_reason = "repo_unavailable"


class BudgetExhaustedError(ParkingError):
    """Today's spend plus this call's estimate would exceed the daily cap, or a priced
    build would start on a day whose cap is already reached."""

    parked_reason = "budget_exhausted"


class BuilderUnavailableError(ParkingError):
    """The configured builder (e.g. the Claude Code CLI) is missing or unusable."""

    parked_reason = "builder_unavailable"


class ConfluenceRefusedError(ParkingError):
    """A Confluence change agent-team refuses to make; nothing was written.

    Bad input (ADF that is not JSON or not a `doc`, a page that does not exist,
    a wrong space id) or an edit a guard refused. The task parks with the
    reason so an operator can fix the input and resubmit.
    """

    parked_reason = "confluence_refused"


class ConfluenceError(ParkingError):
    """Confluence failed (auth, server errors after retries); the message says what to check.

    A parking error, not a failure: the approved draft stays in the task's
    checkpoint, so the write can go on once Confluence (or its credentials) is fixed.
    """

    parked_reason = "confluence_unavailable"


class ModelsDownError(ParkingError):
    """Every model a call may use failed with an error worth retrying, retries and fallbacks spent.

    Parked rather than failed: the provider is down, not the task wrong. The
    checkpoint keeps every answer, so the task continues by itself with growing
    pauses (`coordinator.sweeper`), or at once on `agent-team retry`.
    """

    parked_reason = "model_unavailable"

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        # The longest wait a provider asked for (`retry-after`): the park lasts at least that.
        self.retry_after_s = retry_after_s


class ModelRefusedError(ParkingError):
    """A provider refused the call (401, 403, 400): retrying the same request cannot help.

    Parked, not failed, so that once the key or the model setting is fixed,
    `agent-team retry` continues from the checkpoint and asks nobody again.
    """

    parked_reason = "model_refused"


class ModelError(AgentTeamError):
    """A model call failed or its output did not fit the expected structure."""


class ModelUnavailableError(ModelError):
    """The provider package for the configured model is not installed."""


class BuildError(AgentTeamError):
    """The builder ran and failed; the message carries its (redacted) output tail.

    `usage` is what the failed run reported it cost (a `builders.BuildUsage`),
    so the budget ledger counts money spent on a build that failed too.
    """

    def __init__(self, message: str, *, usage: object | None = None) -> None:
        super().__init__(message)
        self.usage = usage


class TaskStoppedError(AgentTeamError):
    """A cancel or a limit stopped the task's running work (a build's process group was killed).

    `reason` is `cancelled` (an operator's cancel; the task ends `cancelled`),
    `task_timeout` (`AGENT_TEAM_TASK_TIMEOUT`; it ends `failed`) or `budget`
    (a streamed cost passed what was left of today's cap; it parks
    `budget_exhausted`) or `shutdown` (the daemon stopped without waiting for the
    run; nothing is recorded and the next start continues it). `usage` is what
    the stopped build had spent, as for `BuildError`.
    """

    def __init__(self, reason: str, message: str, *, usage: object | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.usage = usage
