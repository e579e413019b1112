"""A child process whose stdout a test reads line by line as it comes (`kubectl logs -f`, an SDK follow).

A reader thread moves lines onto a queue, so that waiting for the next line can time out: a stream that
never delivers fails the test with what it did deliver, instead of hanging it. Stdlib-only.

    with LineStream([...]) as lines:
        lines.until("[worker-1] epoch 2")
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from collections.abc import Sequence
from types import TracebackType

__all__ = ["LineStream"]


class LineStream:
    """`argv` running with unbuffered Python output; `next_line()` / `until()` read its stdout."""

    def __init__(self, argv: Sequence[str]) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True, name="line-stream")
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def next_line(self, timeout: float = 30.0) -> str:
        """The next line; AssertionError when none comes within `timeout` or the stream has ended."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line within {timeout:g} s") from None
        if line is None:
            self._lines.put(None)
            stderr = self.process.stderr.read() if self.process.stderr else ""
            raise AssertionError(f"the stream ended (exit {self.process.wait()}); stderr: {stderr}")
        return line

    def until(self, wanted: str, timeout: float = 30.0) -> list[str]:
        """Every line up to and including `wanted` (each within `timeout` of the previous one)."""
        seen: list[str] = []
        while True:
            try:
                seen.append(self.next_line(timeout))
            except AssertionError as err:
                raise AssertionError(f"{err}, waiting for {wanted!r}; got {seen}") from None
            if seen[-1] == wanted:
                return seen

    def stop(self) -> None:
        """Terminate the process (SIGKILL if it ignores SIGTERM for 10 s) and close its pipes."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=10)  # EOF once the process is gone
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()

    def __enter__(self) -> LineStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
