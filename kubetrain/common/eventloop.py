"""The event loop a long-running operator process runs on: uvloop where it is installed, else asyncio's.

uvloop is libuv's loop with its TLS transport written in Cython: the operator's time goes mostly into
its requests and watch streams (TLS reads and writes, loop callbacks), which asyncio runs in Python. The
bench's `operator_scale.py` run once on each loop shows the difference.

`KUBETRAIN_EVENT_LOOP=asyncio` runs asyncio's loop instead (to compare the two, or to rule the loop out
when chasing a bug); a value other than `uvloop` or `asyncio` is refused before anything starts.

Only a process's entry point calls `run`: it also freezes the objects made before the loop starts
(`gc.freeze()`: modules, model schemas, the controllers) out of the cyclic collector's scans, which
otherwise walk all of them on every full collection while jobs come and go. And it makes the young
collection run every 10,000 net allocations of container objects, not every 700 (`YOUNG_THRESHOLD`).
Each watch event decodes into a few hundred dicts that become the cache's next state, so at 700 the
collector ran about every third event and walked each new object twice before it settled in the old
generation. On 100 MPIJobs (bench/operator_scale.py) that was 80 young and 7 middle collections, 43 ms
of 1.7 s CPU; at 10,000 it is 5 collections and 14 ms. What it can hold back is at most 10,000 small
objects of garbage in reference cycles, a few MiB at worst.
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["EVENT_LOOP_ENV", "LOOPS", "YOUNG_THRESHOLD", "EventLoopChoiceError", "chosen_loop", "run"]

T = TypeVar("T")

EVENT_LOOP_ENV = "KUBETRAIN_EVENT_LOOP"
LOOPS = ("uvloop", "asyncio")
YOUNG_THRESHOLD = 10_000
"""The collector's first threshold while the loop runs (CPython's is 700; see the module docstring)."""


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
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    if loop == "uvloop":
        import uvloop  # noqa: PLC0415

        return uvloop.run(main)
    return asyncio.run(main)
