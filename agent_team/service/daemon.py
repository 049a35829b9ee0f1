"""The agent-team process: the coordinator's worker loop, the HTTP server, systemd, signals.

Start-up binds the HTTP port first (a daemon that cannot listen must not
touch the live ledger), then claims the ledger (one daemon per SQLite file:
`db.claim_daemon_slot`; several may share a PostgreSQL database), then
`wiring.build_runtime` (the ledger migrated and checked, the coordinator, the
integrations), the recovery sweep, the HTTP
server on the bound socket, then the loops; READY=1 goes to systemd only when
all of that stands.
SIGTERM/SIGINT stop new work and let running node executions finish within
`AGENT_TEAM_STOP_GRACE_S`, saying at once what it waits for; a second signal
(Ctrl-C again) stops them now. Either way it exits 0, and a run it stopped
records nothing: its command goes back to pending and its task continues from
its last checkpoint on the next start. A checkpoint is written between nodes,
so the node that was cut off runs again from its first line: a build stopped
part-way starts again from its beginning (docs/architecture.md §4), and the
messages say so rather than promise a resume.

The daemon keeps its row in the ledger's `daemons` table (`agent-team
daemons`, `/api/daemons`): written before the HTTP server answers, touched by
the `heartbeat` loop every third of `AGENT_TEAM_LEASE_S` (and during the stop's
grace), marked stopped after the last run, before the ledger closes.

Integrations plug in here and nowhere else, all the same way: each enabled
one (`integrations.registry`, built by the wiring) adds its HTTP routes,
supervised loops and health facts; the runtime closes everything, in reverse
order, after the last run.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import FrameType

import uvicorn
from starlette.routing import BaseRoute

from agent_team import __version__, db
from agent_team.builders import kill_running_children
from agent_team.common.redact import redact
from agent_team.config import Settings, load_systemd_env
from agent_team.coordinator import Coordinator
from agent_team.dashboard import access_log
from agent_team.dashboard.app import DashboardContext, create_app
from agent_team.exceptions import AgentTeamError, LedgerError
from agent_team.health.loops import Loop
from agent_team.health.status import Health
from agent_team.integrations.base import Integration
from agent_team.integrations.github.integration import GitHubIntegration
from agent_team.service.systemd import Notifier
from agent_team.service.wiring import build_runtime
from agent_team.transports.base import Transport

__all__ = ["Daemon", "DaemonError"]

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0
STABLE_AFTER_S = 30.0  # a loop that ran this long before dying restarts from the short backoff
# How often the daemon writes spend rows the database refused back into it (`_budget_outbox`).
OUTBOX_REPLAY_S = 300.0
# How long stopped runs get to wind down (a killed build's process to be reaped, a model
# call abandoned) before the process exits without waiting for them.
WIND_DOWN_S = 5.0
# How often a stop waiting for runs looks whether it was told to stop them now.
_HURRY_POLL_S = 0.1


def freeze_startup_heap() -> None:
    """Keep what start-up built out of the cyclic GC's full collections (`gc.freeze`).

    Why: a full collection walks every tracked object with the GIL held, and
    after start-up there are about 130,000 (LangGraph, pydantic, Starlette,
    Bolt, the compiled graphs): 40-50 ms in which no request is answered and
    no graph steps, every few tasks (the Slack ack bench's p99 was one such
    pause inside a burst of answers). What start-up built lives as long as
    the process, so walking it again and again finds nothing; whatever is
    made afterwards is collected as before. One collection first, so no
    garbage is frozen.
    """
    gc.collect()
    gc.freeze()


class DaemonError(AgentTeamError):
    """The daemon cannot start (port in use, server failed to come up, ...)."""


class Daemon:
    """One process: build it, add routes and loops, then `run()`."""

    def __init__(
        self,
        settings: Settings,
        *,
        transport: Transport | None = None,
        announce: Callable[[str], None] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.announce = announce or (lambda line: log.info("%s", line))
        # What a person at the terminal is told while the daemon stops (the CLI prints it).
        self.say = say or (lambda line: log.warning("%s", line))
        self._signals = 0  # how many stop signals came (each is handled on a thread of its own)
        self._signals_guard = threading.Lock()
        self._hurry = threading.Event()  # a second signal: stop the runs, do not wait
        self.notifier = Notifier(load_systemd_env())
        self.health = Health()
        self.stop = threading.Event()
        self.bound: tuple[str, int] | None = None  # set once the HTTP server is starting
        self._address: tuple[str, int] | None = None
        self._socket: socket.socket | None = self._bind()
        self._lock: db.DaemonLock | None = None
        try:
            if not isinstance(settings.ledger_target, str):
                # One daemon per SQLite file; on PostgreSQL several share one database and
                # the execution leases keep each task on one of them.
                self._lock = db.claim_daemon_slot(settings.db_path, url=self.url)
            # Everything the process holds, in dependency order (ConfigError: nothing left open).
            self.runtime = build_runtime(settings, transport=transport)
        except BaseException:
            self._release()
            raise
        self.coordinator: Coordinator = self.runtime.coordinator
        self.integrations: list[Integration] = self.runtime.integrations
        self.ctx = DashboardContext(
            settings, health=self.health, coordinator=self.coordinator, clock=self.coordinator.clock
        )
        # Writes are possible with a token or key, or as a person signed in with GitHub.
        self.health.set_fact("dashboard_writes", self.ctx.auth.sign_in_on)
        self.health.set_fact("instance", self.coordinator.instance)
        self.health.set_fact("sandbox", self.coordinator.deps.sandbox.describe())
        self.routes: list[BaseRoute] = []
        # This process in the ledger's `daemons` table (its id is its lease owner's).
        self.me = db.DaemonStart(
            instance_id=self.coordinator.instance,
            host=socket.gethostname(),
            pid=os.getpid(),
            version=__version__,
            url=self._own_url(),
            lease_s=settings.lease_s,
            started_at=self.coordinator.clock(),
        )
        self.loops: list[Loop] = [
            Loop("worker", self._worker),
            Loop("budget-outbox", self._budget_outbox),
            Loop("heartbeat", self._heartbeat),
        ]
        if settings.pg_notify and self.coordinator.ledger.dialect.announce_commands:
            # Other instances' commands wake this one's worker (PostgreSQL LISTEN/NOTIFY).
            self.loops.append(Loop("command-wakeups", self._wakeups))
        self.cut_short = False  # runs were still going when the grace period ended
        self._server: uvicorn.Server | None = None
        self._threads: list[threading.Thread] = []
        self._install_integrations()

    # -- integrations --------------------------------------------------------------------

    def _install_integrations(self) -> None:
        """Plug in every enabled integration the wiring built, one code path for all of them."""
        for integration in self.integrations:
            self.routes.extend(integration.routes())
            self.loops.extend(integration.loops(self.health))
            for key, value in integration.facts().items():
                self.health.set_fact(key, value)

    @property
    def github(self) -> GitHubIntegration | None:
        """The GitHub integration when it is on (its poll totals, its clients)."""
        for integration in self.integrations:
            if isinstance(integration, GitHubIntegration):
                return integration
        return None

    # -- loops -------------------------------------------------------------------------

    def _worker(self, stop: threading.Event, first: bool) -> None:
        self.coordinator.serve(
            stop,
            poll_s=self.settings.poll_s,
            sweep=not first,  # the first sweep ran before READY=1
            beat=lambda: self.health.beat("worker"),
        )

    def _budget_outbox(self, stop: threading.Event, _first: bool) -> None:
        """Write the spend rows the database refused back into it: at start, then every 5 min.

        Until then the cap counts them from the file (`db.outbox_spend`); the
        `budget_outbox_rows` fact (`/healthz`, `/metrics`) says how many wait.
        """
        path = self.settings.ledger_outbox or db.default_outbox_path(self.coordinator.ledger)
        while True:
            try:
                if path.exists():
                    report = db.replay_outbox(path, self.coordinator.ledger)
                    if report["replayed"]:
                        log.info("budget outbox: replayed %d row(s)", report["replayed"])
                self.health.set_fact("budget_outbox_rows", db.outbox_spend(path).rows)
            except OSError as exc:  # its folder unwritable, a full disk: the next round tries
                log.warning("budget outbox %s: %s", path, exc)
            self.health.beat("budget-outbox")
            if stop.wait(OUTBOX_REPLAY_S):
                return

    @property
    def heartbeat_s(self) -> float:
        """How often the daemon says it is alive: a third of its lease time, so a reader
        judges it gone (not seen for `lease_s`) only after three missed beats."""
        return self.settings.lease_s / 3

    def _seen(self) -> None:
        """One heartbeat (a history commit); a ledger away is said and tried next time."""
        try:
            db.daemon_heartbeat(self.coordinator.ledger, self.me, now=self.coordinator.clock())
        except LedgerError as exc:
            log.warning("heartbeat: cannot reach the ledger: %s", redact(str(exc)))

    def _heartbeat(self, stop: threading.Event, _first: bool) -> None:
        """The daemon's row stays fresh while it runs (`agent-team daemons`: up, not gone)."""
        while True:
            self._seen()
            self.health.beat("heartbeat")
            if stop.wait(self.heartbeat_s):
                return

    def _wakeups(self, stop: threading.Event, _first: bool) -> None:
        self.coordinator.listen_for_commands(stop, beat=lambda: self.health.beat("command-wakeups"))

    def _supervise(self, loop: Loop) -> None:
        backoff = 1.0
        first = True
        while not self.stop.is_set():
            self.health.started(loop.name)
            started = time.monotonic()
            try:
                loop.run(self.stop, first)
                if self.stop.is_set():
                    break
                raise RuntimeError(f"loop {loop.name} returned while the daemon runs")
            except Exception as exc:
                message = redact(f"{type(exc).__name__}: {exc}")
                log.exception("loop %s died; restarting in %.0f s", loop.name, backoff)
                self.health.died(loop.name, message)
            if time.monotonic() - started > STABLE_AFTER_S:
                backoff = 1.0
            if self.stop.wait(backoff):
                break
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            first = False
        self.health.stopped(loop.name)

    # -- HTTP ------------------------------------------------------------------------------

    def _bind(self) -> socket.socket:
        host, port = self.settings.dashboard_host, self.settings.dashboard_port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP, not 0: asyncio only sets TCP_NODELAY on sockets that say they are
        # TCP, and without it every kept-alive response waits ~40 ms for a delayed ACK.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            holder = (  # reads the lock file, no more
                None
                if isinstance(self.settings.ledger_target, str)
                else db.daemon_holder(self.settings.db_path)
            )
            if holder is not None:
                raise db.in_use_error(self.settings.db_path.absolute(), holder) from None
            raise DaemonError(
                f"cannot listen on {host}:{port} ({exc.strerror}); stop whatever uses it "
                "or set AGENT_TEAM_DASHBOARD_PORT / AGENT_TEAM_DASHBOARD_HOST"
            ) from None
        sock.listen(128)
        address = sock.getsockname()
        self._address = (str(address[0]), int(address[1]))
        return sock

    def _release(self) -> None:
        """Give up the port and the ledger claim (the runtime is closed separately)."""
        sock, self._socket = self._socket, None
        if sock is not None:
            sock.close()
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def close(self) -> None:
        """For a daemon built but never run (tests): close what `__init__` opened."""
        self.runtime.close()
        self._release()

    def _start_http(self) -> None:
        sock = self._socket
        if sock is None:
            raise DaemonError("the daemon was closed; build a new one to run")
        self.bound = self._address
        app = create_app(self.ctx, self.routes)
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
            log_config=None,  # its records go through our handler and formatter (log_format)
        )
        server = uvicorn.Server(config)
        self._server = server

        def serve_http() -> None:
            self.health.started("http")
            try:
                server.run(sockets=[sock])  # signal handlers stay ours: not the main thread
            except BaseException as exc:  # uvicorn raises SystemExit on a failed start
                self.health.died("http", redact(f"{type(exc).__name__}: {exc}"))
                return
            self.health.stopped("http")

        thread = threading.Thread(target=serve_http, name="agent-team-http", daemon=True)
        thread.start()
        self._threads.append(thread)
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise DaemonError("the HTTP server did not start; see the log above")
            time.sleep(0.01)

    def _own_url(self) -> str:
        """Where this daemon's dashboard answers, as others read it in `agent-team daemons`:
        the bound address, a wildcard one (0.0.0.0, ::) replaced by the host's name."""
        host, port = self._address or (self.settings.dashboard_host, self.settings.dashboard_port)
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    @property
    def url(self) -> str:
        host, port = (
            self.bound
            or self._address
            or (self.settings.dashboard_host, self.settings.dashboard_port)
        )
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    # -- life cycle ----------------------------------------------------------------------

    def _status_line(self) -> str:
        counts = self.coordinator.counts()
        return (
            f"running {counts['running']} / waiting {counts['waiting']} / "
            f"parked {counts['parked']} / queued {counts['queued']}"
        )

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # A handler runs between two bytecodes of the main thread, which may be holding
        # `stop`'s own (non-reentrant) lock inside `stop.wait()`: setting it here could wait
        # for ever. A thread of its own sets it as soon as the main thread lets go.
        threading.Thread(
            target=self._stop_on_signal, args=(signum,), name="agent-team-signal", daemon=True
        ).start()

    def _stop_on_signal(self, signum: int) -> None:
        with self._signals_guard:
            self._signals += 1
            count = self._signals
        log.info("signal %s (%d): stopping", signum, count)
        # Stop first, then say so: a blocked terminal or a full pipe must not hold the stop.
        if count == 1:
            line = self._stopping_line()
            self.request_stop()
            self.say(line)
            return
        running = self.coordinator.running_tasks()
        self._hurry.set()
        self.request_stop()
        if running:
            self.say(f"stopping now: stopping {_runs(running)}")

    def _stopping_line(self) -> str:
        """What a first stop waits for, and how not to wait."""
        running = self.coordinator.running_tasks()
        if not running:
            return "stopping: nothing is running"
        return (
            f"stopping: waiting up to {self.settings.stop_grace_s:g} s for {_runs(running)} "
            "to finish; press Ctrl-C again to stop now (a build stopped part-way starts "
            "again from its beginning on the next start)"
        )

    def request_stop(self) -> None:
        self.stop.set()
        self.coordinator.stop_waiting()

    def run(self) -> int:
        """Run until SIGTERM/SIGINT (or `request_stop()`); returns the exit code."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        # Before any run starts: what builds of a killed earlier run left (containers).
        self.coordinator.deps.sandbox.sweep()
        sweep = self.coordinator.recovery_sweep()
        log.info("recovery sweep: %s", sweep.describe())
        freeze_startup_heap()
        # After the freeze: this thread's write connection, frozen, would never be collected
        # (nor its file closed) if the thread ends before the process (tests run it on one).
        self._register()
        try:
            self._start_http()
        except BaseException:
            self._mark_stopped()  # it never served: not a daemon to look for
            raise
        for loop in self.loops:
            thread = threading.Thread(
                target=self._supervise, args=(loop,), name=f"agent-team-{loop.name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        self.notifier.ready(self._status_line())
        log.info("builds run in: %s", self.coordinator.deps.sandbox.describe())
        self._warn_about_the_builder()
        self.announce(f"agent-team is running: {self.url}")
        self._main_loop()
        return self._shutdown()

    def _register(self) -> None:
        """This daemon's row, before the HTTP server answers: once `/healthz` does, `agent-team
        daemons` lists it. A ledger away now is no reason not to start: the heartbeat writes
        the row as soon as it can."""
        try:
            db.register_daemon(self.coordinator.ledger, self.me, now=self.coordinator.clock())
        except LedgerError as exc:
            log.warning("could not register this daemon in the ledger: %s", redact(str(exc)))

    def _mark_stopped(self) -> None:
        try:
            db.daemon_stopped(
                self.coordinator.ledger, self.me.instance_id, now=self.coordinator.clock()
            )
        except LedgerError as exc:  # it shows as gone once its lease time has passed
            log.warning("could not mark this daemon stopped: %s", redact(str(exc)))

    def _warn_about_the_builder(self) -> None:
        """Say at start what `doctor` knows: tasks would otherwise park only at their build,
        after a person approved their plan."""
        from agent_team.service.doctor import check_builder

        found = check_builder(self.settings)
        if not found.ok:
            log.warning(
                "the builder cannot run: %s; every task will park when its build starts (%s)",
                found.detail,
                found.fix,
            )

    def _main_loop(self) -> None:
        interval = 5.0
        if self.notifier.watchdog_s:
            interval = min(interval, self.notifier.watchdog_s / 2)
        while not self.stop.wait(interval):
            if self._worker_fresh():
                self.notifier.watchdog()
            self.notifier.status(self._status_line())
            self.health.set_fact("loops_held", self.coordinator.loops_held())

    def _worker_fresh(self) -> bool:
        """The watchdog is fed only while the worker loop keeps beating."""
        limit = timedelta(seconds=max(30.0, self.settings.poll_s * 10))
        now = datetime.now(UTC)
        for status in self.health.loops():
            if status.name == "worker":
                return bool(status.alive and status.last_beat and now - status.last_beat < limit)
        return False

    def _shutdown(self) -> int:
        self.notifier.stopping()
        self.request_stop()
        if self._server is not None:
            self._server.should_exit = True
        for thread in self._threads:
            thread.join(timeout=10)
        access_log.flush(timeout_s=2.0)  # the last requests' lines, before the process ends
        if not self._wait_for_runs(self.settings.stop_grace_s):
            stopped = self.coordinator.stop_runs()
            kill_running_children()  # any process no task's tag names
            grace = f"still going after {self.settings.stop_grace_s:g} s"
            why = "told to stop now" if self._hurry.is_set() else grace
            self.say(f"stopped {_runs(stopped)} ({why}); {_AFTER_STOP}")
            # Stopped runs record nothing and end at once; one that does not cannot hold
            # the exit up (it would write through a runtime being closed under it).
            self.cut_short = not self.coordinator.wait_idle(WIND_DOWN_S)
        self._mark_stopped()  # cut short too: the process ends next, its runs resume elsewhere
        if not self.cut_short:
            self.runtime.close()  # integrations, coordinator, transport, then the ledger
        self._release()  # uvicorn closed the socket; cut short, the process exits next
        return 0

    def _wait_for_runs(self, grace_s: float) -> bool:
        """Wait for the runs to finish, up to `grace_s` or a second signal; True if they did.

        Still beating meanwhile: runs finishing are work going on, and a grace longer than
        the lease must not make the daemon look gone (`agent-team daemons`).
        """
        deadline = time.monotonic() + grace_s
        beat = time.monotonic()
        while True:
            left = deadline - time.monotonic()
            if self.coordinator.wait_idle(max(0.0, min(_HURRY_POLL_S, left))):
                return True
            if self._hurry.is_set() or left <= 0:
                return False
            if time.monotonic() - beat >= self.heartbeat_s:
                beat = time.monotonic()
                self._seen()


_AFTER_STOP = (
    "answers and finished steps are kept, and the next start continues each task from its "
    "last checkpoint (a build that was cut off runs again from its beginning)"
)


def _runs(task_ids: list[str]) -> str:
    """`1 run (t1)`, `3 runs (t1, t2, t3)`."""
    shown = ", ".join(task_ids[:5]) + (", …" if len(task_ids) > 5 else "")
    return f"{len(task_ids)} run{'s' if len(task_ids) != 1 else ''} ({shown})"
