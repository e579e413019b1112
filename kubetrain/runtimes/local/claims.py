"""Machine-wide claims on things that several local runs share: local ports, GPUs.

A claim is a file created exclusively (O_EXCL) in a directory shared by every local run of this user,
holding the claiming process's pid. Creating it is atomic, so two runs never both win; a claim whose pid
is gone (a crashed run) is stale and is taken over. Why files and not locks held open: a run's claims
must be visible to other runs for as long as the run lives, whichever of its tasks made them, and
disappear with it when it crashes, which the pid check gives without any daemon.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["Claims", "default_claims_dir"]


def default_claims_dir(what: str) -> Path:
    """The directory of `what` claims shared by every local run of this user on this machine."""
    return Path(tempfile.gettempdir()) / f"kubetrain-local-{what}-{os.getuid()}"


class Claims:
    """Exclusive, pid-owned claims on names in one directory (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def claim(self, name: str) -> bool:
        """Claim `name` for this process; False when a live process holds it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / name
        for _ in range(2):  # a second try after removing a stale claim
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                owner = self.owner(name)
                if owner is not None and _alive(owner):
                    return False
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                continue
            with os.fdopen(fd, "w") as claim:
                claim.write(str(os.getpid()))
            return True
        return False

    def release(self, name: str) -> None:
        """Drop the claim on `name` if this process holds it."""
        with contextlib.suppress(FileNotFoundError):
            if self.owner(name) == os.getpid():
                (self.directory / name).unlink()

    def owner(self, name: str) -> int | None:
        """The pid that holds `name`, or None."""
        try:
            return int((self.directory / name).read_text().strip() or "0") or None
        except (OSError, ValueError):
            return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
