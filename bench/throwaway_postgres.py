"""A PostgreSQL cluster of a benchmark's own, in a temporary directory, to restart at will.

The machine's shared PostgreSQL serves other people's work and is never restarted: this cluster
is made with initdb, listens on a free loopback port (its unix socket in its own directory, not
/var/run/postgresql) and is removed with its directory at the end.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from load_setup import free_port

BINARIES = Path(os.environ.get("STEPWISE_PG_BIN", "/usr/lib/postgresql/15/bin"))
# initdb and postgres refuse to run as root: as root, the cluster belongs to this account.
SYSTEM_ACCOUNT = "postgres"


class ThrowawayPostgres:
    def __init__(self, max_connections: int) -> None:
        self.max_connections = max_connections
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="stepwise-faults-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(part) for part in command],
            capture_output=True,
            text=True,
            check=True,
            **self._account(),
        )

    def _account(self) -> dict[str, Any]:
        if os.geteuid() != 0:
            return {}
        return {"user": SYSTEM_ACCOUNT, "group": SYSTEM_ACCOUNT, "extra_groups": []}

    def start(self) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SYSTEM_ACCOUNT)
            os.chown(self.root, entry.pw_uid, grp.getgrnam(SYSTEM_ACCOUNT).gr_gid)
        self._run(BINARIES / "initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": self.port,
            "unix_socket_directories": f"'{self.root}'",
            "max_connections": self.max_connections,
        }
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        self._run(BINARIES / "pg_ctl", "start", "-w", "-D", self.data, "-l", self.log)

    def restart(self, mode: str) -> float:
        """Stops the server in `mode` (fast or immediate) and starts it again; the seconds taken."""
        started = time.monotonic()
        self._run(BINARIES / "pg_ctl", "restart", "-w", "-m", mode, "-D", self.data, "-l", self.log)
        return time.monotonic() - started

    def version(self) -> str:
        return self._run(BINARIES / "postgres", "--version").stdout.strip()

    def remove(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(
                [str(BINARIES / "pg_ctl"), "stop", "-m", "immediate", "-D", str(self.data)],
                capture_output=True,
                check=False,
                **self._account(),
            )
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ThrowawayPostgres:
        try:
            self.start()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
