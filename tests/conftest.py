"""Shared pytest configuration. Fixtures for the real control plane come from kubetrain.testing.

At the end of a run, the time each tier took (setup, call and teardown of its tests, the session fixtures'
start-up in its first test) is printed, so a slow test command says where its time went.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest

pytest_plugins = ["kubetrain.testing.pytest_plugin"]

# tier -> [seconds, tests]: one pytest session per process, so module state is the session's
_TIERS: defaultdict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
_STARTED = time.monotonic()


def _tier(nodeid: str) -> str:
    parts = Path(nodeid.split("::", 1)[0]).parts
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tier = _TIERS[_tier(report.nodeid)]
    tier[0] += report.duration
    if report.when == "call":
        tier[1] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _TIERS:
        return
    terminalreporter.section("time by tier")
    for name, (seconds, count) in sorted(_TIERS.items(), key=lambda kv: -kv[1][0]):
        terminalreporter.write_line(f"{name:<12} {int(count):>5} tests {seconds:>8.1f} s")
    terminalreporter.write_line(f"{'(session)':<12} {'':>11} {time.monotonic() - _STARTED:>8.1f} s")
