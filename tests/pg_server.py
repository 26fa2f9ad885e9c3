"""A PostgreSQL server of the tests' own: Debian's ``postgresql`` package (the README's test command installs it),
started in a temporary folder on a free port of 127.0.0.1, one per test process (pytest-xdist workers each start
theirs), with a fresh database per test.

PostgreSQL refuses to run as root: when the tests run as root, the server runs as the ``postgres`` user the
package creates (``runuser``), in a folder that user owns. A missing package is an error that says how to install
it, never a skipped test.
"""
from __future__ import annotations

import glob
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

INSTALL_HINT = ("PostgreSQL is not installed: the store's tests run against a real server. Install Debian's "
                "package (`apt-get install -y postgresql`, part of the README's test command), or put its programs "
                "(initdb, pg_ctl) on PATH")
#: Settings of a throwaway server: no fsync (nothing here must survive a power cut), quick to start and stop.
SERVER_OPTIONS = "-c fsync=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=16MB"


class PostgresMissing(RuntimeError):
    pass


def find_bin_dir() -> Path:
    """The folder of ``initdb`` and ``pg_ctl``: on PATH, else Debian's newest ``/usr/lib/postgresql/N/bin``."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    found = [Path(d) for d in glob.glob("/usr/lib/postgresql/*/bin") if (Path(d) / "pg_ctl").exists()
             and (Path(d) / "initdb").exists()]
    if not found:
        raise PostgresMissing(INSTALL_HINT)
    return max(found, key=lambda d: int(re.sub(r"\D", "", d.parent.name) or 0))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """``with PostgresServer() as server:`` a running server; `new_database` gives a URL of an empty database."""

    def __init__(self):
        self.bin = find_bin_dir()
        self.port: int | None = None
        self.dir: Path | None = None
        self._as = []

    # --- life -------------------------------------------------------------------------------------------------
    def __enter__(self) -> "PostgresServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="mmvet-pg-"))
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresMissing("the tests run as root and there is no `postgres` user to run PostgreSQL "
                                      "as (Debian's postgresql package creates it): " + INSTALL_HINT) from None
            self._as = ["runuser", "-u", "postgres", "--"]
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            # the server's user must reach its folder: every parent traversable (/tmp is)
            for parent in self.dir.parents:
                if not os.stat(parent).st_mode & 0o001:
                    raise PostgresMissing(f"{parent} is not traversable by the postgres user: set TMPDIR to a "
                                          "folder whose parents are (chmod o+x), e.g. TMPDIR=/tmp")
        self.dir.chmod(0o700)
        self._run(self.bin / "initdb", "-D", self.dir / "data", "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--locale=C", "--no-sync", "--no-instructions")
        for attempt in range(5):          # a free port may be taken by another process before the server binds
            self.port = _free_port()
            try:
                self._start_on(self.port)
                return
            except PostgresMissing:
                if attempt == 4:
                    raise

    def _start_on(self, port: int) -> None:
        self._run(self.bin / "pg_ctl", "-D", self.dir / "data", "-l", self.dir / "server.log", "-w",
                  "-t", "120", "-o", f"-p {port} -k {self.dir} -c listen_addresses=127.0.0.1 " + SERVER_OPTIONS,
                  "start")

    def halt(self) -> None:
        """Stop the server as an outage would (its clients' connections are cut), keeping its folder, its port and
        its databases for `resume`."""
        self._run(self.bin / "pg_ctl", "-D", self.dir / "data", "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start a halted server again, on the same port with the same databases."""
        self._start_on(self.port)

    def stop(self) -> None:
        if self.dir is None:
            return
        try:
            self._run(self.bin / "pg_ctl", "-D", self.dir / "data", "-m", "immediate", "-w", "stop")
        except PostgresMissing:
            pass            # not running (a failed start): nothing to stop
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _run(self, *argv) -> None:
        proc = subprocess.run([*self._as, *map(str, argv)], capture_output=True, text=True, timeout=180)
        if proc.returncode != 0:
            log = self.dir / "server.log" if self.dir else None
            tail = log.read_text()[-2000:] if log and log.exists() else ""
            raise PostgresMissing(f"{Path(str(argv[0])).name} failed ({proc.returncode}): {proc.stderr.strip()} "
                                  f"{proc.stdout.strip()[-1000:]} {tail}")

    # --- databases --------------------------------------------------------------------------------------------
    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self):
        """A psycopg connection to the server's ``postgres`` database, in autocommit mode."""
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                               autocommit=True)

    def new_database(self) -> str:
        """The URL of a new, empty database."""
        name = "t_" + secrets.token_hex(6)
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def outage(self, url: str, on: bool) -> None:
        """The database of `url` closed to new connections and its sessions ended (`on`), or open again: the
        database server's outage as every client of that database sees it, the server itself running on."""
        name = url.rsplit("/", 1)[1]
        with self.admin() as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"false" if on else "true"}')
            if on:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
