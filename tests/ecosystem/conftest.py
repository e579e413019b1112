"""The ecosystem tier: a failing test's report gets the last lines of the logs of Kueue, the second
scheduler, the operator and the plane its module started."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from kubetrain.testing.process import tail

from .harness import LOGS


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and LOGS:
        text = "\n".join(f"----- {name} ({path})\n{tail(path, 25)}" for name, path in LOGS.items())
        report.sections.append(("ecosystem component logs (last lines)", text))
    return report
