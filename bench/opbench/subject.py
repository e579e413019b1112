"""The process under test: an operator given as a command template, or the floor client.

The command is a template split like a shell line, then each word formatted with the run's values:
`{kubeconfig}` (the identity's kubeconfig), `{namespace}` (the run's namespace), `{port}` (a free
loopback port, e.g. for a health endpoint), `{port2}` and `{port3}` (two more, e.g. for a webhook server
and metrics), `{python}` (this interpreter), `{kind}`, `{jobs}`, `{replicas}`, `{run_for}`. It runs in its
own session (the whole tree is signalled and killed with it) with its output in a log file, and it is
killed if the benchmark dies.

Readiness, so that the clock starts only once the process can act: `url:URL` (a template too; ready when
it answers 200), `log:REGEX` (ready when its output matches), or `after:SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import signal
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kubetrain.testing.process import ComponentProcess

__all__ = ["PLACEHOLDERS", "Readiness", "Subject", "expand"]

PLACEHOLDERS = (
    "kubeconfig", "namespace", "port", "port2", "port3", "python", "kind", "jobs", "replicas", "run_for",
)  # fmt: skip


def expand(template: str, values: Mapping[str, str]) -> list[str]:
    """The argv of `template` with `values` substituted; ValueError naming an unknown placeholder."""
    try:
        words = shlex.split(template)
    except ValueError as err:
        raise ValueError(f"cannot split the command {template!r}: {err}") from err
    if not words:
        raise ValueError("the command is empty")
    try:
        return [word.format_map(values) for word in words]
    except (KeyError, IndexError, ValueError) as err:
        known = ", ".join("{" + k + "}" for k in values)
        raise ValueError(f"bad placeholder {err} in {template!r}; known placeholders: {known}") from err


@dataclass(frozen=True)
class Readiness:
    """How to tell that the process under test is ready: `how` is url, log or after."""

    how: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Readiness:
        how, _, value = text.partition(":")
        try:
            if how not in ("url", "log", "after") or not value:
                raise ValueError("unknown form")
            if how == "after":
                float(value)
            if how == "log":
                re.compile(value)
        except (ValueError, re.error) as err:
            raise ValueError(
                f"readiness {text!r} ({err}): write url:URL, log:REGEX or after:SECONDS"
            ) from None
        return cls(how, value)

    def expanded(self, values: Mapping[str, str]) -> Readiness:
        return Readiness(self.how, self.value.format_map(values)) if self.how == "url" else self


def _answers_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as answer:
            return int(answer.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


class Subject:
    """One started process under test."""

    def __init__(self, argv: list[str], log_path: Path, env: Mapping[str, str]) -> None:
        self.argv = argv
        self.log_path = log_path
        self.process = ComponentProcess("subject", argv, log_path, env)

    @property
    def pid(self) -> int:
        return self.process.pid

    def exit_code(self) -> int | None:
        return self.process.exit_code()

    async def wait_ready(self, readiness: Readiness, *, within: float) -> float:
        """Wait until ready; returns the seconds waited. RuntimeError if the process exits, TimeoutError
        after `within` seconds."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        if readiness.how == "after":
            await asyncio.sleep(float(readiness.value))
        while not await self._ready(readiness):
            self.process.ensure_running()
            if loop.time() - began > within:
                raise TimeoutError(f"not ready ({readiness.how}:{readiness.value}) within {within:.0f} s")
            await asyncio.sleep(0.1)
        self.process.ensure_running()
        return loop.time() - began

    async def _ready(self, readiness: Readiness) -> bool:
        if readiness.how == "url":
            return await asyncio.to_thread(_answers_ok, readiness.value)
        if readiness.how == "log":
            text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
            return re.search(readiness.value, text, re.MULTILINE) is not None
        return True

    def go(self) -> None:
        """The floor client's start signal."""
        self.process.signal(signal.SIGUSR1)

    async def stop(self, grace: float) -> None:
        """SIGTERM to the tree, SIGKILL after `grace` seconds."""
        with contextlib.suppress(ProcessLookupError):
            await asyncio.to_thread(self.process.stop, grace)

    def log_tail(self, lines: int = 20) -> str:
        return self.process.log_tail(lines)
