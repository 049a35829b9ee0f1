"""A throwaway PostgreSQL for the tests: Debian's `initdb` and `pg_ctl` in a temporary folder.

Why not a system service: the tests must not depend on (or change) a server
the machine happens to run, and CI starts from nothing. The server listens on
127.0.0.1 on a free port and on a unix socket inside its own folder, runs with
durability off (a test database is thrown away), and is stopped and its folder
removed at the end. `initdb` refuses to run as root, so as root (CI) every
server command runs as the `postgres` user that Debian's package creates.

Run as a script it wraps one command with a server and a fresh database in
`AGENT_TEAM_DATABASE_URL` (`make schema` regenerates schema.postgres.sql so):

    python -m tests.pg_server agent-team schema --dialect postgres --write schema.postgres.sql
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PgServer", "PgServerError", "find_bindir"]

_SUPERUSER = "postgres"
_TIMEOUT_S = 60
_PREFIX = "agent-team-pg-"
_OWNER_FILE = "owner.pid"


class PgServerError(RuntimeError):
    """The server could not be made or started; the message says which step failed."""


def find_bindir() -> Path:
    """The folder holding `initdb` and `pg_ctl` (on PATH, else Debian's newest version)."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(os.path.realpath(on_path)).parent
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if not found:
        raise PgServerError(
            "initdb not found (on PATH or in /usr/lib/postgresql/*/bin); "
            "install PostgreSQL with `apt-get install postgresql-15`"
        )
    return Path(found[-1]).parent


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_orphans(bindir: Path, as_postgres: bool) -> list[Path]:
    """Stop and remove servers of earlier runs whose test process is gone (killed, not ended).

    `pg_ctl` detaches the server, so a test run killed with SIGKILL leaves it
    running; each folder names its owner, and only folders of this helper whose
    owner is dead are touched.
    """
    reaped = []
    for folder in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        try:
            owner = int((folder / _OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue
        if _alive(owner):
            continue
        command = [str(bindir / "pg_ctl"), "-D", str(folder / "data"), "-m", "immediate", "stop"]
        if as_postgres:
            command = ["runuser", "-u", _SUPERUSER, "--", *command]
        subprocess.run(command, capture_output=True, timeout=_TIMEOUT_S, check=False)
        shutil.rmtree(folder, ignore_errors=True)
        reaped.append(folder)
    return reaped


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PgServer:
    """One PostgreSQL cluster in a temporary folder; `start()`, `create_database()`, `stop()`."""

    def __init__(self) -> None:
        self.bindir = find_bindir()
        self._as_postgres = os.geteuid() == 0
        reap_orphans(self.bindir, self._as_postgres)
        self.folder = Path(tempfile.mkdtemp(prefix=_PREFIX))
        (self.folder / _OWNER_FILE).write_text(f"{os.getpid()}\n")
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = _free_port()
        self.user = _SUPERUSER if self._as_postgres else pwd.getpwuid(os.geteuid()).pw_name
        self._running = False

    @property
    def admin_url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def _run(self, step: str, *args: str) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", _SUPERUSER, "--", *command]
        try:
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PgServerError(f"{step} failed: {exc}") from None
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            log_tail = self.log.read_text(errors="replace")[-400:] if self.log.exists() else ""
            raise PgServerError(
                f"{step} failed (exit {proc.returncode}): {' | '.join(detail[-3:])} {log_tail}"
            )

    def start(self) -> PgServer:
        if self._as_postgres:
            try:
                pwd.getpwnam(_SUPERUSER)
            except KeyError:
                raise PgServerError(
                    "no `postgres` user to run initdb as (initdb refuses root); "
                    "install Debian's postgresql-15 package"
                ) from None
            shutil.chown(self.folder, user=_SUPERUSER)
        self._run(
            "initdb",
            "initdb",
            "-D",
            str(self.data),
            "-U",
            self.user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        )
        options = " ".join(
            [
                f"-p {self.port}",
                f"-k {self.folder}",
                "-c listen_addresses=127.0.0.1",
                "-c max_connections=300",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
            ]
        )
        self._run(
            "pg_ctl start", "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options,
            "-w", "-t", str(_TIMEOUT_S), "start",
        )  # fmt: skip
        self._running = True
        return self

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql)

    def create_database(self) -> str:
        """A new, empty database; returns its URL."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self._admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        try:
            if self._running:
                self._running = False
                self._run("pg_ctl stop", "pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def running_server() -> Iterator[PgServer]:
    """A started server, stopped and removed on the way out whatever happened."""
    server = PgServer()
    try:
        yield server.start()
    finally:
        server.stop()


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tests.pg_server COMMAND [ARGS...]", file=sys.stderr)
        return 2
    with running_server() as server:
        url = server.create_database()
        env = {**os.environ, "AGENT_TEAM_DATABASE_URL": url}
        return subprocess.run(argv, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
