"""The ledger's schema, version by version: the statements both backends migrate through.

A fresh ledger is made by the same steps that upgrade an old one (v0 -> v1 ->
... -> v18), so there is one path to the current schema and `schema.sql` is a
dump of what that path produces. The statements of a released version are
history: never edit them, add a new version instead (CONTRIBUTING.md).
`schema` applies them to SQLite and `schema_postgres` derives PostgreSQL's from
them; both import this module, and it imports neither.
"""

from __future__ import annotations

from agent_team.exceptions import SchemaTooNewError

__all__ = ["LEDGER_TABLES", "REQUIRED_COLUMNS", "SCHEMA_VERSION"]

SCHEMA_VERSION = 18

_V1 = (
    """CREATE TABLE pending_questions (
    question_id  TEXT PRIMARY KEY,
    thread_id    TEXT NOT NULL,
    turn         INTEGER NOT NULL CHECK (turn >= 1),
    status       TEXT NOT NULL DEFAULT 'open'
                 CHECK (status IN ('open', 'answered', 'expired', 'superseded')),
    transport    TEXT NOT NULL,
    channel_ref  TEXT,
    posted_at    TEXT,
    deadline_at  TEXT,
    answer_json  TEXT,
    answered_at  TEXT,
    answered_via TEXT
)""",
    "CREATE INDEX idx_questions_thread_turn ON pending_questions (thread_id, turn)",
    "CREATE INDEX idx_questions_status ON pending_questions (status)",
    """CREATE UNIQUE INDEX idx_questions_open_channel_ref ON pending_questions (channel_ref)
    WHERE channel_ref IS NOT NULL AND status = 'open'""",
    """CREATE TABLE budget_ledger (
    entry_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    thread_id     TEXT NOT NULL,
    stage         TEXT NOT NULL,
    model         TEXT NOT NULL,
    billing_mode  TEXT NOT NULL CHECK (billing_mode IN ('api', 'subscription')),
    input_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens INTEGER NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    usd_cost      REAL NOT NULL DEFAULT 0 CHECK (usd_cost >= 0),
    recorded_at   TEXT NOT NULL,
    day_bucket    TEXT NOT NULL
)""",
    "CREATE INDEX idx_budget_day ON budget_ledger (day_bucket)",
    "CREATE INDEX idx_budget_thread ON budget_ledger (thread_id)",
    """CREATE TABLE schema_meta (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version INTEGER NOT NULL
)""",
)

_V2 = (
    """CREATE TABLE ingested_issues (
    source      TEXT NOT NULL,
    issue_id    TEXT NOT NULL,
    ingested_at TEXT NOT NULL,
    PRIMARY KEY (source, issue_id)
)""",
)

_V3 = (
    """CREATE TABLE task_transitions (
    transition_id INTEGER PRIMARY KEY AUTOINCREMENT,
    thread_id     TEXT NOT NULL,
    from_phase    TEXT,
    to_phase      TEXT NOT NULL,
    entered_at    TEXT NOT NULL,
    exited_at     TEXT,
    status        TEXT NOT NULL,
    note          TEXT
)""",
    "CREATE INDEX idx_transitions_thread ON task_transitions (thread_id, entered_at)",
    # The database itself keeps "at most one open row per task".
    """CREATE UNIQUE INDEX idx_transitions_one_open ON task_transitions (thread_id)
    WHERE exited_at IS NULL""",
)

_V4 = (
    """ALTER TABLE pending_questions ADD COLUMN
    kind TEXT NOT NULL DEFAULT 'clarify' CHECK (kind IN ('clarify', 'plan_decision'))""",
)

# SQLite cannot alter a CHECK: build the new table, copy with an explicit column
# list, swap, and recreate every index (https://sqlite.org/lang_altertable.html#otheralter).
_V5_REBUILD = (
    """CREATE TABLE pending_questions_v5 (
    question_id  TEXT PRIMARY KEY,
    thread_id    TEXT NOT NULL,
    turn         INTEGER NOT NULL CHECK (turn >= 1),
    status       TEXT NOT NULL DEFAULT 'open'
                 CHECK (status IN ('open', 'answered', 'expired', 'superseded')),
    transport    TEXT NOT NULL,
    channel_ref  TEXT,
    posted_at    TEXT,
    deadline_at  TEXT,
    answer_json  TEXT,
    answered_at  TEXT,
    answered_via TEXT,
    kind         TEXT NOT NULL DEFAULT 'clarify'
                 CHECK (kind IN ('clarify', 'plan_decision', 'confluence_approval'))
)""",
    """INSERT INTO pending_questions_v5 (
    question_id, thread_id, turn, status, transport, channel_ref, posted_at,
    deadline_at, answer_json, answered_at, answered_via, kind)
SELECT question_id, thread_id, turn, status, transport, channel_ref, posted_at,
    deadline_at, answer_json, answered_at, answered_via, kind
FROM pending_questions ORDER BY rowid""",
    "DROP TABLE pending_questions",
    "ALTER TABLE pending_questions_v5 RENAME TO pending_questions",
    "CREATE INDEX idx_questions_thread_turn ON pending_questions (thread_id, turn)",
    "CREATE INDEX idx_questions_status ON pending_questions (status)",
    """CREATE UNIQUE INDEX idx_questions_open_channel_ref ON pending_questions (channel_ref)
    WHERE channel_ref IS NOT NULL AND status = 'open'""",
)

_V6 = (
    """CREATE TABLE tasks (
    id            TEXT PRIMARY KEY,
    kind          TEXT NOT NULL CHECK (kind IN ('code', 'confluence')),
    source        TEXT NOT NULL,
    source_ref    TEXT,
    title         TEXT NOT NULL,
    body          TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL DEFAULT 'queued' CHECK (status IN
                  ('queued', 'running', 'waiting', 'parked', 'done', 'failed', 'cancelled')),
    phase         TEXT NOT NULL DEFAULT 'intake',
    parked_reason TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
)""",
    "CREATE INDEX idx_tasks_status ON tasks (status)",
    "CREATE INDEX idx_tasks_created ON tasks (created_at)",
    """CREATE TABLE commands (
    command_id   TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('start', 'resume', 'cancel')),
    task_id      TEXT NOT NULL,
    payload_json TEXT NOT NULL DEFAULT '{}',
    state        TEXT NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'claimed', 'done', 'failed')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    claimed_by   TEXT,
    lease_until  TEXT,
    created_at   TEXT NOT NULL,
    done_at      TEXT,
    error        TEXT
)""",
    "CREATE INDEX idx_commands_state ON commands (state, created_at)",
    "CREATE INDEX idx_commands_task ON commands (task_id)",
    "ALTER TABLE pending_questions ADD COLUMN payload_json TEXT",
)

# v7: durable records of the outside world (docs/architecture.md §4): inbound event ids seen once
# (Slack event_id, GitHub X-GitHub-Delivery), outbound side effects with their result id
# (Slack posts, GitHub comments and PRs, git pushes, Confluence writes), and the intake
# poller's per-repo cursor (ETag, rate limit, counters) so a restart still polls cheaply;
# and a covering index for the per-day budget reads.
_V7 = (
    """CREATE TABLE seen_events (
    source   TEXT NOT NULL,
    event_id TEXT NOT NULL,
    seen_at  TEXT NOT NULL,
    PRIMARY KEY (source, event_id)
)""",
    "CREATE INDEX idx_seen_events_at ON seen_events (seen_at)",
    """CREATE TABLE side_effects (
    effect_id    TEXT PRIMARY KEY,
    task_id      TEXT NOT NULL,
    kind         TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'done', 'failed')),
    request_json TEXT,
    result_ref   TEXT,
    result_json  TEXT,
    error        TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
)""",
    "CREATE INDEX idx_side_effects_task ON side_effects (task_id, kind)",
    # Covers every per-day budget read (the cap check, /api/budget, `agent-team budget`):
    # sums and groups come from the index alone, already in GROUP BY order.
    """CREATE INDEX idx_budget_day_covering ON budget_ledger
    (day_bucket, billing_mode, model, stage, input_tokens, output_tokens, usd_cost)""",
    """CREATE TABLE intake_cursors (
    source         TEXT NOT NULL,
    label          TEXT NOT NULL,
    etag           TEXT,
    last_poll_at   TEXT,
    last_status    INTEGER,
    polls          INTEGER NOT NULL DEFAULT 0,
    not_modified   INTEGER NOT NULL DEFAULT 0,
    tasks_created  INTEGER NOT NULL DEFAULT 0,
    rate_remaining INTEGER,
    rate_reset_at  TEXT,
    next_poll_at   TEXT,
    failures       INTEGER NOT NULL DEFAULT 0,
    last_error     TEXT,
    PRIMARY KEY (source, label)
)""",
)

# v8: execution leases with fencing epochs (one row per task run or singleton loop,
# `name` = `task:<id>` or `loop:<name>`; the epoch only grows), the epoch a transition
# was written under, and when a finished task's checkpoints were pruned.
_V8 = (
    """CREATE TABLE leases (
    name        TEXT PRIMARY KEY,
    owner       TEXT,
    epoch       INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),
    lease_until TEXT,
    acquired_at TEXT,
    renewed_at  TEXT,
    takeovers   INTEGER NOT NULL DEFAULT 0
)""",
    "CREATE INDEX idx_leases_owner ON leases (owner)",
    "ALTER TABLE task_transitions ADD COLUMN epoch INTEGER",
    "ALTER TABLE tasks ADD COLUMN checkpoints_pruned_at TEXT",
)

# v9: the checkpoint retention pass's work list. Partial: it holds only tasks whose
# checkpoints are still kept, so a pass reads the few due rows however many pruned tasks
# the ledger holds. Keyed on `status` alone: `updated_at` changes on every step, and an
# index on it would make each of those writes an index write (and not HOT on PostgreSQL).
_V9 = (
    """CREATE INDEX idx_tasks_unpruned ON tasks (status)
    WHERE checkpoints_pruned_at IS NULL""",
)

# v10: automations (task templates on a schedule), their runs (one row per claimed slot:
# the claim gate's record, unique per slot), and the hash-chained audit log with its head
# (the last row's hash and the row count, updated by every append: a write conflict on
# PostgreSQL, the write lock on SQLite, so appends form one chain; and a truncated tail
# no longer matches the head).
_V10 = (
    """CREATE TABLE automations (
    automation_id TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    title         TEXT NOT NULL,
    body          TEXT NOT NULL,
    kind          TEXT NOT NULL DEFAULT 'code' CHECK (kind IN ('code', 'confluence')),
    repo          TEXT,
    schedule_kind TEXT NOT NULL CHECK (schedule_kind IN ('every', 'cron', 'once')),
    every_s       INTEGER CHECK (every_s IS NULL OR every_s >= 60),
    cron          TEXT,
    timezone      TEXT NOT NULL DEFAULT 'UTC',
    overlap       TEXT NOT NULL DEFAULT 'skip' CHECK (overlap IN ('skip', 'allow')),
    status        TEXT NOT NULL DEFAULT 'active'
                  CHECK (status IN ('active', 'paused', 'cancelled')),
    first_run_at  TEXT NOT NULL,
    next_run_at   TEXT,
    last_slot_at  TEXT,
    created_by    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
)""",
    """CREATE UNIQUE INDEX idx_automations_name ON automations (name)
    WHERE status <> 'cancelled'""",
    """CREATE INDEX idx_automations_due ON automations (next_run_at)
    WHERE status = 'active'""",
    """CREATE TABLE automation_runs (
    run_id        TEXT PRIMARY KEY,
    automation_id TEXT NOT NULL,
    slot_at       TEXT NOT NULL,
    manual        INTEGER NOT NULL DEFAULT 0,
    missed        INTEGER NOT NULL DEFAULT 0,
    status        TEXT NOT NULL DEFAULT 'claimed' CHECK (status IN
                  ('claimed', 'created', 'skipped_budget', 'skipped_overlap', 'failed')),
    task_id       TEXT NOT NULL,
    claimed_by    TEXT NOT NULL,
    claimed_at    TEXT NOT NULL,
    finished_at   TEXT,
    detail        TEXT,
    UNIQUE (automation_id, slot_at)
)""",
    "CREATE INDEX idx_automation_runs_claimed ON automation_runs (status) WHERE status = 'claimed'",
    "CREATE INDEX idx_automation_runs_task ON automation_runs (task_id)",
    """CREATE TABLE audit_log (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    at        TEXT NOT NULL,
    actor     TEXT NOT NULL,
    via       TEXT NOT NULL,
    action    TEXT NOT NULL,
    target    TEXT NOT NULL,
    detail    TEXT,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
)""",
    "CREATE INDEX idx_audit_log_target ON audit_log (target, seq)",
    "CREATE INDEX idx_audit_log_at ON audit_log (at)",
    """CREATE TABLE audit_head (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    rows  INTEGER NOT NULL,
    hash  TEXT NOT NULL
)""",
)

# v11 (bytes per finished task, a flat cost per task):
# - `resumed_at`: when a question's resume command finished, copied onto the question when
#   the retention pass deletes a finished task's done commands, so the answer -> resume
#   latency (`/metrics`) outlives them. NULL while the command itself is kept.
# - a task's questions by `(thread_id, status)` instead of `(thread_id, turn)` (nothing
#   reads by turn): with `status = ? AND thread_id = ?`, or a join on `thread_id` with a
#   status, SQLite picked `idx_questions_status` and walked every question in that status,
#   which for `answered` is the whole history.
# - `idx_budget_day` goes: `idx_budget_day_covering` starts with the same column and
#   serves every read it did; one index entry less per model call.
# - a task's transitions by `thread_id` alone: every read takes one task's few rows and
#   sorts them, and the timestamp in each entry was a third of the table's bytes that a
#   finished task keeps (on PostgreSQL equal keys also share one deduplicated entry).
_V11 = (
    "ALTER TABLE pending_questions ADD COLUMN resumed_at TEXT",
    "CREATE INDEX idx_questions_thread_status ON pending_questions (thread_id, status)",
    "DROP INDEX idx_questions_thread_turn",
    "DROP INDEX idx_budget_day",
    "DROP INDEX idx_transitions_thread",
    "CREATE INDEX idx_transitions_thread ON task_transitions (thread_id)",
    # Tasks pruned before v11 lose what the retention pass now deletes (`db.retention`):
    # the pass never visits them again. No-ops on a new ledger.
    """UPDATE pending_questions SET resumed_at = (SELECT c.done_at FROM commands c
    WHERE c.command_id = 'resume:' || pending_questions.question_id)
    WHERE resumed_at IS NULL
    AND thread_id IN (SELECT id FROM tasks WHERE checkpoints_pruned_at IS NOT NULL)
    AND EXISTS (SELECT 1 FROM commands c
    WHERE c.command_id = 'resume:' || pending_questions.question_id AND c.kind = 'resume'
    AND c.state = 'done' AND c.done_at IS NOT NULL)""",
    """DELETE FROM commands WHERE state = 'done'
    AND task_id IN (SELECT id FROM tasks WHERE checkpoints_pruned_at IS NOT NULL)""",
    """INSERT INTO leases (name, epoch, takeovers)
    SELECT 'task:', 0, n FROM (SELECT COALESCE(SUM(takeovers), 0) AS n FROM leases
    WHERE owner IS NULL AND name IN
    (SELECT 'task:' || id FROM tasks WHERE checkpoints_pruned_at IS NOT NULL)) AS pruned
    WHERE n > 0""",
    """DELETE FROM leases WHERE owner IS NULL AND name IN
    (SELECT 'task:' || id FROM tasks WHERE checkpoints_pruned_at IS NOT NULL)""",
)

# v12: each UTC day's spend per billing mode, kept up to date with every budget row in
# the same transaction (`db.record_usage`). The daily cap is checked before every model
# call; summing the day's rows made that check grow with the day's volume (1.3 ms at
# 20,000 calls). Filled from the rows already there.
_V12 = (
    """CREATE TABLE budget_days (
    day_bucket TEXT NOT NULL,
    billing_mode TEXT NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0 CHECK (calls >= 0),
    input_tokens INTEGER NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens INTEGER NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    usd_cost REAL NOT NULL DEFAULT 0 CHECK (usd_cost >= 0),
    PRIMARY KEY (day_bucket, billing_mode)
)""",
    """INSERT INTO budget_days (day_bucket, billing_mode, calls, input_tokens, output_tokens,
    usd_cost) SELECT day_bucket, billing_mode, COUNT(*), SUM(input_tokens), SUM(output_tokens),
    SUM(usd_cost) FROM budget_ledger GROUP BY day_bucket, billing_mode""",
)

# v13: model calls that survive their providers (issue #28).
# - `tasks.resume_at`: when a task parked `model_unavailable` continues by itself (the
#   timers pass queues it, `db.due_model_parks`); NULL whenever the task is not parked.
# - `tasks.model_parks`: how many times in a row the task parked `model_unavailable`; it
#   picks the next pause (`Settings.resume_pauses`) and goes back to 0 after a call that
#   answered (`db.reset_model_parks`).
# - `model_failures`: one row per failed attempt of a model call (retried, fell back to
#   the next model, gave up, refused by the provider, an answer that did not fit), so
#   `show` can say "answered after 2 failed attempts" and which model answered.
# - `idx_tasks_resume_at`: partial, so the timers' look for due tasks reads only the tasks
#   with a pause running, however many others are parked.
_V13 = (
    "ALTER TABLE tasks ADD COLUMN resume_at TEXT",
    "ALTER TABLE tasks ADD COLUMN model_parks INTEGER NOT NULL DEFAULT 0 CHECK (model_parks >= 0)",
    """CREATE INDEX idx_tasks_resume_at ON tasks (resume_at)
    WHERE resume_at IS NOT NULL""",
    """CREATE TABLE model_failures (
    failure_id  INTEGER PRIMARY KEY AUTOINCREMENT,
    thread_id   TEXT NOT NULL,
    stage       TEXT NOT NULL,
    model       TEXT NOT NULL,
    attempt     INTEGER NOT NULL CHECK (attempt >= 1),
    outcome     TEXT NOT NULL
                CHECK (outcome IN ('retried', 'fell_back', 'gave_up', 'refused', 'invalid')),
    http_status INTEGER,
    detail      TEXT NOT NULL,
    recorded_at TEXT NOT NULL
)""",
    "CREATE INDEX idx_model_failures_thread ON model_failures (thread_id, failure_id)",
    # A row whose tokens are our estimate, not the provider's count (a timed-out or abandoned
    # attempt): it counts against the cap, but names no model as having answered.
    "ALTER TABLE budget_ledger ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0 "
    "CHECK (estimated BETWEEN 0 AND 1)",
)

# v14: the loop after the pull request (issue #29).
# - `pending_questions.kind` adds `pull_request` (the PR gate, answered by GitHub: a review,
#   a merge, a close) and `pr_decision` (a person decides fix / ignore / take over). SQLite
#   cannot alter a CHECK: the table is rebuilt as in v5, every column and index kept.
# - `pull_requests`: one row per task whose draft PR is open or was; what the watcher polls
#   (its ETag, the head it last saw), the rounds of follow-ups, and whether a person took over.
# - `pr_events`: what happened on a task's PR that the daemon acted on or did (a review
#   answered, a follow-up pushed, a CI rerun), keyed so each is acted on once whatever
#   delivers it (webhook, poller, both); kept for the task's life: it is the PR's timeline.
_V14 = (
    """CREATE TABLE pending_questions_v14 (
    question_id  TEXT PRIMARY KEY,
    thread_id    TEXT NOT NULL,
    turn         INTEGER NOT NULL CHECK (turn >= 1),
    status       TEXT NOT NULL DEFAULT 'open'
                 CHECK (status IN ('open', 'answered', 'expired', 'superseded')),
    transport    TEXT NOT NULL,
    channel_ref  TEXT,
    posted_at    TEXT,
    deadline_at  TEXT,
    answer_json  TEXT,
    answered_at  TEXT,
    answered_via TEXT,
    kind         TEXT NOT NULL DEFAULT 'clarify'
                 CHECK (kind IN ('clarify', 'plan_decision', 'confluence_approval',
                                 'pull_request', 'pr_decision')),
    payload_json TEXT,
    resumed_at   TEXT
)""",
    """INSERT INTO pending_questions_v14 (
    question_id, thread_id, turn, status, transport, channel_ref, posted_at,
    deadline_at, answer_json, answered_at, answered_via, kind, payload_json, resumed_at)
SELECT question_id, thread_id, turn, status, transport, channel_ref, posted_at,
    deadline_at, answer_json, answered_at, answered_via, kind, payload_json, resumed_at
FROM pending_questions ORDER BY rowid""",
    "DROP TABLE pending_questions",
    "ALTER TABLE pending_questions_v14 RENAME TO pending_questions",
    "CREATE INDEX idx_questions_status ON pending_questions (status)",
    "CREATE INDEX idx_questions_thread_status ON pending_questions (thread_id, status)",
    """CREATE UNIQUE INDEX idx_questions_open_channel_ref ON pending_questions (channel_ref)
    WHERE channel_ref IS NOT NULL AND status = 'open'""",
    """CREATE TABLE pull_requests (
    task_id    TEXT PRIMARY KEY,
    repo       TEXT NOT NULL,
    number     INTEGER NOT NULL CHECK (number >= 1),
    url        TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'merged', 'closed')),
    head_sha   TEXT,
    etag       TEXT,
    rounds     INTEGER NOT NULL DEFAULT 0 CHECK (rounds >= 0),
    hands_off  INTEGER NOT NULL DEFAULT 0 CHECK (hands_off BETWEEN 0 AND 1),
    opened_at  TEXT NOT NULL,
    checked_at TEXT,
    ready_at   TEXT,
    closed_at  TEXT
)""",
    "CREATE UNIQUE INDEX idx_pull_requests_number ON pull_requests (repo, number)",
    "CREATE INDEX idx_pull_requests_state ON pull_requests (state)",
    """CREATE TABLE pr_events (
    task_id     TEXT NOT NULL,
    event_key   TEXT NOT NULL,
    kind        TEXT NOT NULL,
    round       INTEGER NOT NULL DEFAULT 0 CHECK (round >= 0),
    head_sha    TEXT,
    actor       TEXT,
    detail_json TEXT NOT NULL DEFAULT '{}',
    at          TEXT NOT NULL,
    PRIMARY KEY (task_id, event_key)
)""",
)

# v15: people and their keys (issue #30).
# - `people`: a person's name, role (viewer < contributor < maintainer < owner) and the
#   identities other surfaces know them by (a Slack user id, a GitHub login), each unique.
# - `api_keys`: a person's keys, stored as a SHA-256 of the key only (a key is 32 random
#   bytes: a slow hash would add nothing); `key_id` is the key's public part, so a key is
#   found by one index lookup and compared in constant time; `revoked_at` ends it.
_V15 = (
    """CREATE TABLE people (
    name         TEXT PRIMARY KEY,
    role         TEXT NOT NULL
                 CHECK (role IN ('viewer', 'contributor', 'maintainer', 'owner')),
    slack_id     TEXT,
    github_login TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
)""",
    "CREATE UNIQUE INDEX idx_people_slack ON people (slack_id) WHERE slack_id IS NOT NULL",
    """CREATE UNIQUE INDEX idx_people_github ON people (github_login)
    WHERE github_login IS NOT NULL""",
    """CREATE TABLE api_keys (
    key_id       TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    key_hash     TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at   TEXT
)""",
    "CREATE INDEX idx_api_keys_name ON api_keys (name)",
)

# v16: `POST /api/tasks` takes an `Idempotency-Key` (issue #30).
# - `idempotency_keys`: one row per (caller, key) whose request made a task, with a digest
#   of what it asked for; written in the task's own transaction, so a retry (here or on
#   another daemon, before or after a restart) finds the task instead of making a second.
#   The retention pass forgets rows after 24 h (`db.prune_idempotency_keys`), by
#   `idx_idempotency_keys_created`.
_V16 = (
    """CREATE TABLE idempotency_keys (
    scope       TEXT NOT NULL,
    idem_key    TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (scope, idem_key)
)""",
    "CREATE INDEX idx_idempotency_keys_created ON idempotency_keys (created_at)",
)

# v17: Sign in with GitHub on the dashboard (issue #30).
# - `oauth_states`: the one-time `state` of each sign-in begun, as a SHA-256 only, with
#   where to go afterwards and when it expires (10 minutes). Spending it is one
#   compare-and-set (`used_at`), so a replayed callback fails on any daemon of the ledger and
#   after a restart. The retention pass deletes rows a day after they expire, by
#   `idx_oauth_states_expires`.
_V17 = (
    """CREATE TABLE oauth_states (
    state_hash  TEXT PRIMARY KEY,
    next_path   TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    used_at     TEXT
)""",
    "CREATE INDEX idx_oauth_states_expires ON oauth_states (expires_at)",
)

# v18: which daemons run on this ledger (issue #32; seed 004's worker registry).
# - `daemons`: one row per daemon process (`instance_id` is its lease owner,
#   `host:pid:start-time`), written at its start, touched by its heartbeat (every third of
#   `lease_s`, the daemon's own lease time, kept in the row so every reader judges it alike:
#   not seen for that long, it is gone) and marked `stopped_at` on a clean stop. What it
#   holds is read from `leases`, not kept here. A few rows per daemon restart; the retention
#   pass deletes rows not seen for 7 days, so the table stays tiny and needs no index.
_V18 = (
    """CREATE TABLE daemons (
    instance_id  TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL CHECK (pid >= 0),
    version      TEXT NOT NULL,
    url          TEXT,
    lease_s      REAL NOT NULL CHECK (lease_s > 0),
    started_at   TEXT NOT NULL,
    last_seen_at TEXT NOT NULL,
    stopped_at   TEXT
)""",
)

# Version -> statements. v5 also needs foreign keys off around its transaction.
_STEPS: dict[int, tuple[str, ...]] = {
    1: _V1,
    2: _V2,
    3: _V3,
    4: _V4,
    5: _V5_REBUILD,
    6: _V6,
    7: _V7,
    8: _V8,
    9: _V9,
    10: _V10,
    11: _V11,
    12: _V12,
    13: _V13,
    14: _V14,
    15: _V15,
    16: _V16,
    17: _V17,
    18: _V18,
}
_FOREIGN_KEYS_OFF = frozenset({5, 14})

LEDGER_TABLES = (
    "pending_questions",
    "budget_ledger",
    "budget_days",
    "schema_meta",
    "ingested_issues",
    "task_transitions",
    "tasks",
    "commands",
    "seen_events",
    "side_effects",
    "intake_cursors",
    "leases",
    "automations",
    "automation_runs",
    "audit_log",
    "audit_head",
    "model_failures",
    "pull_requests",
    "pr_events",
    "people",
    "api_keys",
    "idempotency_keys",
    "oauth_states",
    "daemons",
)

REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "pending_questions": (
        "question_id",
        "thread_id",
        "turn",
        "status",
        "transport",
        "channel_ref",
        "posted_at",
        "deadline_at",
        "answer_json",
        "answered_at",
        "answered_via",
        "kind",
        "payload_json",
        "resumed_at",
    ),
    "budget_ledger": (
        "entry_id",
        "thread_id",
        "stage",
        "model",
        "billing_mode",
        "input_tokens",
        "output_tokens",
        "usd_cost",
        "recorded_at",
        "day_bucket",
        "estimated",
    ),
    "budget_days": (
        "day_bucket",
        "billing_mode",
        "calls",
        "input_tokens",
        "output_tokens",
        "usd_cost",
    ),
    "schema_meta": ("id", "schema_version"),
    "ingested_issues": ("source", "issue_id", "ingested_at"),
    "task_transitions": (
        "transition_id",
        "thread_id",
        "from_phase",
        "to_phase",
        "entered_at",
        "exited_at",
        "status",
        "note",
        "epoch",
    ),
    "tasks": (
        "id",
        "kind",
        "source",
        "source_ref",
        "title",
        "body",
        "status",
        "phase",
        "parked_reason",
        "created_at",
        "updated_at",
        "checkpoints_pruned_at",
        "resume_at",
        "model_parks",
    ),
    "commands": (
        "command_id",
        "kind",
        "task_id",
        "payload_json",
        "state",
        "attempts",
        "claimed_by",
        "lease_until",
        "created_at",
        "done_at",
        "error",
    ),
    "seen_events": ("source", "event_id", "seen_at"),
    "side_effects": (
        "effect_id",
        "task_id",
        "kind",
        "state",
        "request_json",
        "result_ref",
        "result_json",
        "error",
        "created_at",
        "updated_at",
    ),
    "intake_cursors": (
        "source",
        "label",
        "etag",
        "last_poll_at",
        "last_status",
        "polls",
        "not_modified",
        "tasks_created",
        "rate_remaining",
        "rate_reset_at",
        "next_poll_at",
        "failures",
        "last_error",
    ),
    "leases": ("name", "owner", "epoch", "lease_until", "acquired_at", "renewed_at", "takeovers"),
    "automations": (
        "automation_id",
        "name",
        "title",
        "body",
        "kind",
        "repo",
        "schedule_kind",
        "every_s",
        "cron",
        "timezone",
        "overlap",
        "status",
        "first_run_at",
        "next_run_at",
        "last_slot_at",
        "created_by",
        "created_at",
        "updated_at",
    ),
    "automation_runs": (
        "run_id",
        "automation_id",
        "slot_at",
        "manual",
        "missed",
        "status",
        "task_id",
        "claimed_by",
        "claimed_at",
        "finished_at",
        "detail",
    ),
    "audit_log": ("seq", "at", "actor", "via", "action", "target", "detail", "prev_hash", "hash"),
    "audit_head": ("id", "rows", "hash"),
    "model_failures": (
        "failure_id",
        "thread_id",
        "stage",
        "model",
        "attempt",
        "outcome",
        "http_status",
        "detail",
        "recorded_at",
    ),
    "pull_requests": (
        "task_id",
        "repo",
        "number",
        "url",
        "state",
        "head_sha",
        "etag",
        "rounds",
        "hands_off",
        "opened_at",
        "checked_at",
        "ready_at",
        "closed_at",
    ),
    "pr_events": (
        "task_id",
        "event_key",
        "kind",
        "round",
        "head_sha",
        "actor",
        "detail_json",
        "at",
    ),
    "people": ("name", "role", "slack_id", "github_login", "created_at", "updated_at"),
    "api_keys": ("key_id", "name", "key_hash", "created_at", "last_used_at", "revoked_at"),
    "idempotency_keys": ("scope", "idem_key", "fingerprint", "task_id", "created_at"),
    "oauth_states": ("state_hash", "next_path", "created_at", "expires_at", "used_at"),
    "daemons": (
        "instance_id",
        "host",
        "pid",
        "version",
        "url",
        "lease_s",
        "started_at",
        "last_seen_at",
        "stopped_at",
    ),
}


def _refuse_newer(version: int, where: str) -> None:
    if version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"the ledger {where} is at schema version {version}, but this agent-team "
            f"understands up to {SCHEMA_VERSION}; upgrade agent-team (never downgrade a ledger)"
        )
