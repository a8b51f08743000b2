"""`stepwise serve`: uvicorn in worker processes that each listen on a socket of their own.

uvicorn's multi-worker mode shares one listening socket among its workers, and the worker that
wakes first accepts every connection then waiting (asyncio takes up to the backlog at once).
64 labelers connecting together landed 35, 20, 9 and 0 on four workers, and the busiest, held
to one core by the GIL, set everybody's pace. Here every worker binds the port with
SO_REUSEPORT, and the kernel spreads new connections evenly over the workers' sockets.
"""

from __future__ import annotations

import logging
import logging.config
import multiprocessing
import os
import signal
import socket
import time
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType

import uvicorn
from uvicorn.config import LOGGING_CONFIG, STARTUP_FAILURE

APP = "app.main:create_app"
# Workers finish their requests after SIGTERM; one still there after this is killed.
SHUTDOWN_GRACE_S = 30.0
# A worker that exits this soon after starting is taken to have failed to start (a bad setting,
# a database it cannot reach): a replacement would fail the same way, so serving stops.
STARTUP_WINDOW_S = 10.0

logger = logging.getLogger("uvicorn.error")


class PortInUse(Exception):
    pass


def serve(host: str, port: int, workers: int) -> int:
    """Serve until stopped (SIGINT, SIGTERM); the exit status."""
    if workers <= 1:
        uvicorn.run(APP, factory=True, host=host, port=port, proxy_headers=True, log_level="info")
        return 0
    port = _free_port_check(host, port)
    # The parent's own lines (workers started, died, stopped) in the workers' format.
    logging.config.dictConfig(LOGGING_CONFIG)
    return _Supervisor(host, port, workers).run()


def _config(host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(APP, factory=True, host=host, port=port, proxy_headers=True, log_level="info")


def _address(host: str, port: int) -> tuple[socket.AddressFamily, tuple]:  # type: ignore[type-arg]
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    return family, address


def _free_port_check(host: str, port: int) -> int:
    """The port, checked free before any worker starts (a port of 0 becomes a free one).

    Bound without SO_REUSEPORT, so that a port another server holds is refused here with one
    clear message rather than by every worker in turn.
    """
    family, address = _address(host, port)
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise PortInUse(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        return int(probe.getsockname()[1])


def _listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    family, address = _address(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    sock.listen(backlog)
    return sock


def _run_worker(host: str, port: int) -> None:
    config = _config(host, port)
    uvicorn.Server(config).run(sockets=[_listening_socket(host, port, config.backlog)])


class _Supervisor:
    """Starts the workers, replaces any that dies, and stops them all on SIGINT or SIGTERM."""

    def __init__(self, host: str, port: int, workers: int) -> None:
        self.host = host
        self.port = port
        self.count = workers
        # spawn, not fork: a forked worker would inherit the parent's threads and locks.
        self.context = multiprocessing.get_context("spawn")
        self.started: dict[int, float] = {}
        self.stopping = False

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._stop)
        logger.info("Started parent process [%d], %d workers on %s:%d", os.getpid(), self.count, self.host, self.port)
        workers = [self._start() for _ in range(self.count)]
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
        worker = self.context.Process(target=_run_worker, args=(self.host, self.port), name="stepwise-worker")
        worker.start()
        assert worker.pid is not None
        self.started[worker.pid] = time.monotonic()
        return worker

    def _failed_to_start(self, worker: BaseProcess) -> bool:
        assert worker.pid is not None
        lived = time.monotonic() - self.started.pop(worker.pid, 0.0)
        # Killed by a signal (a negative code) is a death, however soon: the replacement may live.
        code = worker.exitcode or 0
        return code == STARTUP_FAILURE or (lived < STARTUP_WINDOW_S and code > 0)

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
