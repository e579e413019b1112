"""The event loop a long-running operator process runs on: uvloop where it is installed, else asyncio's.

uvloop is libuv's loop with its TLS transport written in Cython: the operator's time goes mostly into
its requests and watch streams (TLS reads and writes, loop callbacks), which asyncio runs in Python. The
difference on 500 MPIJobs is in bench/README.md.

`KUBETRAIN_EVENT_LOOP=asyncio` runs asyncio's loop instead (to compare the two, or to rule the loop out
when chasing a bug); a value other than `uvloop` or `asyncio` is refused before anything starts.

Only a process's entry point calls `run`: it also freezes the objects made before the loop starts
(`gc.freeze()`: modules, model schemas, the controllers) out of the cyclic collector's scans, which
otherwise walk all of them on every full collection while jobs come and go.
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["EVENT_LOOP_ENV", "LOOPS", "EventLoopChoiceError", "chosen_loop", "run"]

T = TypeVar("T")

EVENT_LOOP_ENV = "KUBETRAIN_EVENT_LOOP"
LOOPS = ("uvloop", "asyncio")


class EventLoopChoiceError(ValueError):
    """`KUBETRAIN_EVENT_LOOP` names no loop this process can run."""


def chosen_loop() -> str:
    """`uvloop` or `asyncio`: what `KUBETRAIN_EVENT_LOOP` asks for (default uvloop), uvloop only where
    it is installed (it is a dependency on Linux and macOS; elsewhere asyncio's loop runs)."""
    choice = os.environ.get(EVENT_LOOP_ENV, "").strip().lower() or "uvloop"
    if choice not in LOOPS:
        raise EventLoopChoiceError(
            f"{EVENT_LOOP_ENV}={os.environ[EVENT_LOOP_ENV]!r} is not an event loop: set it to "
            f"{' or '.join(LOOPS)}, or unset it for uvloop"
        )
    if choice == "uvloop":
        try:
            import uvloop  # noqa: F401, PLC0415  (only a process's entry point needs it)
        except ImportError:
            return "asyncio"
    return choice


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a new loop of the chosen kind (see the module docstring)."""
    try:
        loop = chosen_loop()
    except EventLoopChoiceError:
        main.close()  # never awaited: say nothing about it
        raise
    gc.collect()
    gc.freeze()
    if loop == "uvloop":
        import uvloop  # noqa: PLC0415

        return uvloop.run(main)
    return asyncio.run(main)
