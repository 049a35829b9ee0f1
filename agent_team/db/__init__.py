"""The ledger: the only package that writes SQL or knows a database driver (DESIGN.md §5-§7).

Callers hold a `Ledger` (from `open_ledger`) and pass it to the functions
here; every public function is one transaction. State changes are
compare-and-sets in one write transaction each, so one `Ledger` may be
shared by many threads.
"""

from __future__ import annotations

from agent_team.db.backup import backup_ledger, list_backups
from agent_team.db.budget import (
    OUTBOX_FILENAME,
    default_outbox_path,
    record_usage,
    replay_outbox,
    spent,
    task_usage,
    tokens_spent,
    usage_summary,
)
from agent_team.db.clock import day_bucket, from_iso, to_iso, utc_now
from agent_team.db.commands import (
    Claim,
    claim_commands,
    claim_runs,
    complete_command,
    enqueue_command,
    fail_command,
    get_command,
    list_commands,
    release_command,
)
from agent_team.db.cursors import (
    count_tasks_created,
    forget_etag,
    get_cursor,
    list_cursors,
    record_poll,
)
from agent_team.db.daemon_lock import (
    DaemonHolder,
    DaemonLock,
    claim_daemon_slot,
    daemon_holder,
    in_use_error,
)
from agent_team.db.effects import begin_effect, finish_effect, get_effect, list_effects
from agent_team.db.events import claim_event, event_seen, prune_events, release_event
from agent_team.db.fencing import Fence, check_fence, current_fence, fenced, unfenced
from agent_team.db.fencing import counters as fence_counters
from agent_team.db.intake import (
    delete_issue_ingested,
    issue_already_ingested,
    record_issue_ingested,
)
from agent_team.db.leases import (
    acquire_lease,
    get_lease,
    list_leases,
    release_lease,
    release_leases_of,
    renew_leases,
    task_lease_name,
)
from agent_team.db.ledger import Dialect, Ledger, Reader, Row, Transaction
from agent_team.db.open import open_ledger
from agent_team.db.open_errors import ensure_writable_folder, folder_problem, integrity_problem
from agent_team.db.outage import is_outage
from agent_team.db.questions import (
    answer_question,
    answered_without_resume,
    ensure_question,
    expire_question,
    find_open_question_by_channel_ref,
    find_open_question_kind_by_channel_ref,
    get_question,
    list_questions,
    overdue_questions,
    record_delivery,
    reopen_question,
    resume_command_id,
    supersede_question,
)
from agent_team.db.records import (
    Command,
    IntakeCursor,
    Lease,
    Question,
    ReplayReport,
    SideEffect,
    Task,
    Transition,
    UsageSummaryRow,
)
from agent_team.db.schema import (
    LEDGER_TABLES,
    SCHEMA_VERSION,
    assert_ready,
    dump_fresh_postgres_schema,
    dump_schema,
    init_db,
    migrate,
    schema_version,
)
from agent_team.db.sqlite_ledger import SqliteLedger
from agent_team.db.stats import table_counts
from agent_team.db.tasks import (
    count_tasks_by_status,
    create_task,
    get_task,
    list_tasks,
    parked_before,
    set_task_status,
)
from agent_team.db.transfer import (
    TableCopy,
    TransferReport,
    transfer_to_postgres,
    transfer_to_sqlite,
)
from agent_team.db.transitions import (
    close_terminal,
    enter_phase,
    list_transitions,
    record_transition,
)
from agent_team.db.views.dashboard import (
    AnswerResume,
    OpenQuestions,
    Spend,
    answer_resume_times,
    count_tasks,
    open_questions_summary,
    spent_by_mode,
    transition_costs,
    unattributed_spend,
)
from agent_team.db.views.github import IssueClaim, list_issue_claims, task_ids_by_source
from agent_team.db.views.pages import TaskCost, task_costs, task_sources
from agent_team.db.views.slack import answered_since, find_question_by_channel_ref

__all__ = [
    "LEDGER_TABLES",
    "OUTBOX_FILENAME",
    "SCHEMA_VERSION",
    "AnswerResume",
    "Claim",
    "Command",
    "DaemonHolder",
    "DaemonLock",
    "Dialect",
    "Fence",
    "IntakeCursor",
    "IssueClaim",
    "Lease",
    "Ledger",
    "OpenQuestions",
    "Question",
    "Reader",
    "ReplayReport",
    "Row",
    "SideEffect",
    "Spend",
    "SqliteLedger",
    "TableCopy",
    "Task",
    "TaskCost",
    "Transaction",
    "TransferReport",
    "Transition",
    "UsageSummaryRow",
    "acquire_lease",
    "answer_question",
    "answer_resume_times",
    "answered_since",
    "answered_without_resume",
    "assert_ready",
    "backup_ledger",
    "begin_effect",
    "check_fence",
    "claim_commands",
    "claim_daemon_slot",
    "claim_event",
    "claim_runs",
    "close_terminal",
    "complete_command",
    "count_tasks",
    "count_tasks_by_status",
    "count_tasks_created",
    "create_task",
    "current_fence",
    "daemon_holder",
    "day_bucket",
    "default_outbox_path",
    "delete_issue_ingested",
    "dump_fresh_postgres_schema",
    "dump_schema",
    "enqueue_command",
    "ensure_question",
    "ensure_writable_folder",
    "enter_phase",
    "event_seen",
    "expire_question",
    "fail_command",
    "fence_counters",
    "fenced",
    "find_open_question_by_channel_ref",
    "find_open_question_kind_by_channel_ref",
    "find_question_by_channel_ref",
    "finish_effect",
    "folder_problem",
    "forget_etag",
    "from_iso",
    "get_command",
    "get_cursor",
    "get_effect",
    "get_lease",
    "get_question",
    "get_task",
    "in_use_error",
    "init_db",
    "integrity_problem",
    "is_outage",
    "issue_already_ingested",
    "list_backups",
    "list_commands",
    "list_cursors",
    "list_effects",
    "list_issue_claims",
    "list_leases",
    "list_questions",
    "list_tasks",
    "list_transitions",
    "migrate",
    "open_ledger",
    "open_questions_summary",
    "overdue_questions",
    "parked_before",
    "prune_events",
    "record_delivery",
    "record_issue_ingested",
    "record_poll",
    "record_transition",
    "record_usage",
    "release_command",
    "release_event",
    "release_lease",
    "release_leases_of",
    "renew_leases",
    "reopen_question",
    "replay_outbox",
    "resume_command_id",
    "schema_version",
    "set_task_status",
    "spent",
    "spent_by_mode",
    "supersede_question",
    "table_counts",
    "task_costs",
    "task_ids_by_source",
    "task_lease_name",
    "task_sources",
    "task_usage",
    "to_iso",
    "tokens_spent",
    "transfer_to_postgres",
    "transfer_to_sqlite",
    "transition_costs",
    "unattributed_spend",
    "unfenced",
    "usage_summary",
    "utc_now",
]
