"""`stepwise serve`: uvicorn in worker processes that each listen on a socket of their own.

uvicorn's multi-worker mode shares one listening socket among its workers, and the worker that
wakes first accepts every connection then waiting (asyncio takes up to the backlog at once).
64 labelers connecting together landed 35, 20, 9 and 0 on four workers, and the busiest, held
to one core by the GIL, set everybody's pace. Here every worker binds the port with
SO_REUSEPORT, and the kernel hands each new connection to one of the workers' sockets by a hash
of its addresses: even on average, and never all of a burst to whoever woke first. Connections
still queued on the socket of a worker that dies are reset, where a shared socket would keep them.
"""

from __future__ import annotations

import gc
import logging
import logging.config
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event as EventType
from types import FrameType

import uvicorn

from app.ops.logs import logging_config
from app.ops.metrics import MULTIPROC_ENV

APP = "app.main:create_app"
# Workers finish their requests after SIGTERM; one still there after this is killed. Under
# Docker's default 10 s between SIGTERM and SIGKILL, so that the workers get the grace, not Docker.
SHUTDOWN_GRACE_S = 8.0

logger = logging.getLogger("uvicorn.error")


class CannotListen(Exception):
    pass


def serve(
    host: str,
    port: int,
    workers: int,
    announce: Callable[[str], None],
    *,
    access_log: bool = False,
    log_format: str = "text",
) -> int:
    """Serve until stopped (SIGINT, SIGTERM); the exit status. `announce` gets the address.

    `access_log` logs a line for every request. Off unless asked for, as in gunicorn: behind a
    proxy that logs them already, the lines cost 15% of the server's throughput at 64 labelers
    (alternating runs: 387.5 / 378.5 next-task req/s without them, 323.5 / 328.3 with).
    """
    logs = _Logs(access_log, log_format)
    port = _free_port_check(host, port)
    if workers <= 1:
        announce(f"http://{host}:{port}/")
        server = _Server(_config(host, port, logs))
        # uvicorn stops on SIGTERM, then raises the signal again for whoever handled it before:
        # handled here, the stop it asked for ends in status 0 (as with several workers), not 143.
        previous = signal.signal(signal.SIGTERM, lambda *_: None)
        try:
            server.run()
        except KeyboardInterrupt:
            # uvicorn stops on Ctrl-C, then raises it again for whoever called it.
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
        return 0 if server.started else 1
    announce(f"http://{host}:{port}/")
    # The parent's own lines (workers started, died, stopped) in the workers' format.
    logging.config.dictConfig(logs.config())
    # Each worker counts its metrics in files here, and a scrape adds them all up. Made for this
    # start only: counts left by an earlier server would be added to this one's.
    metrics_dir = tempfile.mkdtemp(prefix="stepwise-metrics-")
    os.environ[MULTIPROC_ENV] = metrics_dir
    try:
        return _Supervisor(host, port, workers, logs).run()
    finally:
        del os.environ[MULTIPROC_ENV]
        shutil.rmtree(metrics_dir, ignore_errors=True)


class _Logs:
    """How the server logs, passed to worker processes (it pickles, a dictConfig may not)."""

    def __init__(self, access_log: bool, log_format: str) -> None:
        self.access_log = access_log
        self.log_format = log_format

    def config(self) -> dict:  # type: ignore[type-arg]
        return logging_config(self.log_format, self.access_log)


def _config(host: str, port: int, logs: _Logs) -> uvicorn.Config:
    return uvicorn.Config(
        APP,
        factory=True,
        host=host,
        port=port,
        proxy_headers=True,
        log_level="info",
        log_config=logs.config(),
        # uvicorn's access line in text; in JSON, app.ops.middleware logs the request instead.
        access_log=logs.access_log and logs.log_format == "text",
    )


def _family(host: str) -> socket.AddressFamily:
    # As uvicorn's own multi-worker mode does: one address, IPv6 when the host is written as one.
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _free_port_check(host: str, port: int) -> int:
    """The port, checked free before any worker starts (a port of 0 becomes a free one).

    Bound without SO_REUSEPORT, so that a port another server holds is refused here with one
    clear message rather than by every worker in turn.
    """
    with socket.socket(_family(host), socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CannotListen(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        return int(probe.getsockname()[1])


def _bound_socket(host: str, port: int) -> socket.socket:
    """Bound, not yet listening: the server listens once the app has started, so the kernel
    gives a starting worker no connections it cannot answer yet."""
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


class _Server(uvicorn.Server):
    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            # What the started app holds (modules, routes, the engine, templates: about 200,000
            # objects) lives as long as the process. Frozen, the cycle collector stops rescanning
            # it on each full collection, about 0.1 s apiece, which a large page (the Labels tab
            # or Agreement report of 40,000 labels) set off while building its rows.
            gc.collect()
            gc.freeze()


class _Worker(_Server):
    """The server, telling the supervisor once the app has started."""

    def __init__(self, config: uvicorn.Config, ready: EventType) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.ready.set()


def _run_worker(host: str, port: int, logs: _Logs, ready: EventType) -> None:
    # Ctrl-C in a terminal reaches every process of the group: the supervisor stops the workers
    # with SIGTERM, so a worker leaves SIGINT alone outside uvicorn's own handling of it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    _Worker(_config(host, port, logs), ready).run(sockets=[_bound_socket(host, port)])


def _exit_with_parent() -> None:
    """A supervisor killed outright cannot stop its workers: they stop themselves, or they would
    go on holding the port."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        wait([parent.sentinel])
        os.kill(os.getpid(), signal.SIGTERM)


class _Supervisor:
    """Starts the workers, replaces any that dies, and stops them all on SIGINT or SIGTERM.

    A worker that dies before its app has started (a bad setting, a database it cannot reach)
    stops serving altogether: a replacement would fail the same way, over and over.
    """

    def __init__(self, host: str, port: int, workers: int, logs: _Logs) -> None:
        self.host = host
        self.port = port
        self.logs = logs
        self.count = workers
        # spawn, not fork: a forked worker would inherit the parent's threads and locks.
        self.context = multiprocessing.get_context("spawn")
        self.ready: dict[int, EventType] = {}
        self.stopping = False

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._stop)
        logger.info("Started parent process [%d], %d workers on %s:%d", os.getpid(), self.count, self.host, self.port)
        workers: list[BaseProcess] = []
        while len(workers) < self.count and not self.stopping:
            workers.append(self._start())
        status = 0
        while not self.stopping:
            wait([w.sentinel for w in workers], timeout=0.5)
            for i, worker in enumerate(workers):
                if worker.is_alive() or self.stopping:
                    continue
                if self._failed_to_start(worker):
                    logger.error("Child process [%d] failed to start (exit %s): stopping", worker.pid, worker.exitcode)
                    self.stopping, status = True, 1
                    break
                logger.info("Child process [%d] died", worker.pid)
                workers[i] = self._start()
        self._stop_all(workers)
        logger.info("Stopping parent process [%d]", os.getpid())
        return status

    def _start(self) -> BaseProcess:
        ready = self.context.Event()
        worker = self.context.Process(target=_run_worker, args=(self.host, self.port, self.logs, ready), name="stepwise-worker")
        worker.start()
        assert worker.pid is not None
        self.ready[worker.pid] = ready
        return worker

    def _failed_to_start(self, worker: BaseProcess) -> bool:
        assert worker.pid is not None
        started = self.ready.pop(worker.pid).is_set()
        # Killed by a signal (a negative code) is a death, however soon: a replacement may live.
        return not started and (worker.exitcode or 0) > 0

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def _stop_all(self, workers: list[BaseProcess]) -> None:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                logger.warning("Child process [%d] still running after %.0f s: killed", worker.pid, SHUTDOWN_GRACE_S)
                worker.kill()
                worker.join()
