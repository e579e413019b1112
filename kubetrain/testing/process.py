"""Child processes of the test control plane: started in their own process group, logged to a file,
stopped with SIGTERM then SIGKILL, and never left behind.

Each component runs in a new session so that a signal to its process group reaches anything it forks.
On Linux the child also asks the kernel to SIGKILL it when the parent dies (PR_SET_PDEATHSIG), so a
pytest killed with SIGKILL does not leak API servers; atexit and context managers cover the normal paths.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = [
    "ComponentProcess",
    "free_port",
    "make_owned_tempdir",
    "sweep_orphaned_tempdirs",
    "tail",
    "wait_until",
]

_PR_SET_PDEATHSIG = 1
_handed_out: set[int] = set()


_LOWEST_PORT = 10000
"""Ports handed out lie between this and the kernel's ephemeral range."""


def _ephemeral_floor() -> int:
    """The lowest port the kernel gives to an outgoing connection or a bind to port 0 (Linux's default)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback TCP port that was free a moment ago and was not handed out before by this process.

    It is chosen below the kernel's ephemeral range: a port taken from that range (a bind to port 0) is
    free only until the program it is meant for binds it, and in between any process's outgoing connection
    may be given it as its local port (a test tier that opens thousands of connections did, and a TensorFlow
    worker then could not start its gRPC server)."""
    top = _ephemeral_floor()
    chooser = random.SystemRandom()
    for _ in range(1000):
        port = chooser.randrange(_LOWEST_PORT, top) if top > _LOWEST_PORT else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            port = int(sock.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free loopback port between {_LOWEST_PORT} and {top} after 1,000 tries")


def tail(path: Path, lines: int) -> str:
    """The last `lines` lines of a text file ('' when it does not exist)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 256 * 1024))
            data = handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


OWNER_FILE = "owner.pid"


def make_owned_tempdir(prefix: str, parent: str | None = None) -> Path:
    """A temporary directory stamped with our pid, so that a later run can sweep it if we get SIGKILLed."""
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    (directory / OWNER_FILE).write_text(str(os.getpid()))
    return directory


def sweep_orphaned_tempdirs(prefix: str, parents: Sequence[str]) -> list[Path]:
    """Remove `prefix*` directories whose owner process is gone (left behind by a killed run)."""
    removed = []
    for parent in parents:
        for directory in Path(parent).glob(f"{prefix}*"):
            try:
                os.kill(int((directory / OWNER_FILE).read_text()), 0)
            except ProcessLookupError:
                shutil.rmtree(directory, ignore_errors=True)
                removed.append(directory)
            except (OSError, ValueError):
                continue  # not ours to judge: no stamp, unreadable, or a live process of another user
    return removed


def _libc_prctl() -> Callable[..., int] | None:
    if sys.platform != "linux":
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PRCTL = _libc_prctl()  # resolved in the parent: the child only makes the call


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGKILL me when the thread that started me exits."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ComponentProcess:
    """One running binary of the plane (etcd, kube-apiserver, ...), with its log file."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str]) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            log.write(f"$ {' '.join(self.argv)}\n".encode())
            log.flush()
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env),
                start_new_session=True,
                preexec_fn=_die_with_parent if _PRCTL is not None else None,  # noqa: PLW1509
            )

    @property
    def pid(self) -> int:
        return self._popen.pid

    def exit_code(self) -> int | None:
        """None while running."""
        return self._popen.poll()

    def log_tail(self, lines: int = 40) -> str:
        return tail(self.log_path, lines)

    def ensure_running(self) -> None:
        """Raise with the log tail when the process has exited."""
        code = self._popen.poll()
        if code is not None:
            raise RuntimeError(
                f"{self.name} exited with code {code}; last lines of {self.log_path}:\n{self.log_tail()}"
            )

    def signal(self, signum: int) -> None:
        """Signal the whole process group (ignored when it is already gone)."""
        if self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._popen.pid, signum)

    def wait(self, timeout: float) -> bool:
        """True when the process exited within `timeout` seconds."""
        try:
            self._popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; also reaps stray members of the group."""
        self.signal(signal.SIGTERM)
        if not self.wait(grace):
            self.signal(signal.SIGKILL)
            self.wait(5.0)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, signal.SIGKILL)


def wait_until(
    what: str,
    check: Callable[[], bool],
    *,
    timeout: float,
    processes: Sequence[ComponentProcess] = (),
    interval: float = 0.1,
) -> float:
    """Poll `check` until it returns True; fail early when one of `processes` died. Returns seconds waited."""
    start = time.monotonic()
    while True:
        for process in processes:
            process.ensure_running()
        with contextlib.suppress(OSError):
            if check():
                return time.monotonic() - start
        if time.monotonic() - start > timeout:
            tails = "\n".join(f"--- {p.name} ({p.log_path}):\n{p.log_tail(20)}" for p in processes)
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}\n{tails}")
        time.sleep(interval)
