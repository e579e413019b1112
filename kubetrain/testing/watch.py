"""Every change to one collection of the test API server, as a watch delivers it.

A check that samples a list every so often misses what lives between two samples: a pod created and
replaced within the interval, a job that got its condition and was deleted by its TTL before the next
look. `WatchLog` lists the collection once, then watches from the list's resourceVersion, resuming from
the last version it saw each time the server ends the watch, so it records every version of every object.
If it cannot resume (410 Gone: the history it needs was compacted) or the connection fails, the record has
a gap, and `check()` raises instead of letting a test pass on it.

    with WatchLog(plane.rest, f"/api/v1/namespaces/{ns}/pods") as pods:
        ...  # drive the operator
        pods.caught_up()
        assert all(len(uids) == 1 for uids in pods.uids().values())
"""

from __future__ import annotations

import threading
import time
import urllib.error
from types import TracebackType
from typing import Any

from kubetrain.testing.rest import AdminRest

__all__ = ["WatchLog"]

Obj = dict[str, Any]
TOO_MANY_REQUESTS = 429
WINDOW = 5
"""Seconds each watch request lasts (`timeoutSeconds`) before it is resumed: how long stop() may wait."""


class WatchLog:
    """Every version of every object under `path` (a collection: `/api/v1/namespaces/ns/pods`), in
    order, from start() to stop(); a context manager. Reads are safe while the watch runs."""

    def __init__(self, rest: AdminRest, path: str) -> None:
        self._rest = rest
        self._path = path
        self._lock = threading.Lock()
        self._versions: dict[str, list[Obj]] = {}
        self._resource_version = ""
        self._error: str | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch {path}", daemon=True)

    def start(self, timeout: float = 30.0) -> WatchLog:
        """List the collection (waiting up to `timeout` while the server answers 429, as it does while a
        new CRD's storage initialises), then watch it in a thread."""
        deadline = time.monotonic() + timeout
        status, found = self._rest.get(self._path)
        while status == TOO_MANY_REQUESTS and time.monotonic() < deadline:
            time.sleep(0.5)
            status, found = self._rest.get(self._path)
        if status != 200:
            raise RuntimeError(f"GET {self._path} answered {status}: {found}")
        for item in found.get("items") or ():
            self._record(item)
        self._resource_version = found["metadata"]["resourceVersion"]
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(WINDOW + 30)

    def __enter__(self) -> WatchLog:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # reading ----------------------------------------------------------------------------------------
    def versions(self, name: str) -> list[Obj]:
        """Every version of object `name` seen, oldest first (as it was deleted last, if it was)."""
        with self._lock:
            return list(self._versions.get(name, ()))

    def names(self) -> set[str]:
        """Every object seen, deleted or not."""
        with self._lock:
            return set(self._versions)

    def uids(self) -> dict[str, set[str]]:
        """The UIDs seen under each name: more than one means the object was deleted and made again."""
        with self._lock:
            return {n: {v["metadata"]["uid"] for v in vs} for n, vs in self._versions.items()}

    def check(self) -> None:
        """Raise AssertionError if the record has a gap (the watch could not go on)."""
        if self._error is not None:
            raise AssertionError(f"the watch of {self._path} missed events: {self._error}")

    def caught_up(self, timeout: float = 30.0) -> None:
        """Wait until the record holds the version of every object a fresh list shows; then check()."""
        deadline = time.monotonic() + timeout
        while not self._holds(self._rest.get(self._path)[1].get("items") or []):
            self.check()
            if time.monotonic() > deadline:
                raise AssertionError(f"the watch of {self._path} is {timeout:g} s behind a list")
            time.sleep(0.2)
        self.check()

    def _holds(self, items: list[Obj]) -> bool:
        with self._lock:
            latest = {n: vs[-1]["metadata"]["resourceVersion"] for n, vs in self._versions.items()}
        return all(latest.get(i["metadata"]["name"]) == i["metadata"]["resourceVersion"] for i in items)

    # recording --------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    for event in self._rest.stream(self._query(), timeout=WINDOW + 30):
                        self._handle(event)
                except urllib.error.HTTPError as err:
                    if err.code != TOO_MANY_REQUESTS:  # "wait, then ask again": no event is lost
                        raise
                    err.close()
                    time.sleep(0.5)
        except Exception as err:  # any other failure is a gap; check() reports it
            self._error = f"{type(err).__name__}: {err}"

    def _query(self) -> str:
        return (
            f"{self._path}?watch=1&allowWatchBookmarks=true&timeoutSeconds={WINDOW}"
            f"&resourceVersion={self._resource_version}"
        )

    def _handle(self, event: Obj) -> None:
        obj = event["object"]
        if event["type"] == "ERROR":
            raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
        if event["type"] != "BOOKMARK":
            self._record(obj)
        self._resource_version = obj["metadata"]["resourceVersion"]

    def _record(self, obj: Obj) -> None:
        with self._lock:
            self._versions.setdefault(obj["metadata"]["name"], []).append(obj)
