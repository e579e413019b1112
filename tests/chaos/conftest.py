"""The chaos tier: faults on the real control plane. Every test here carries the `chaos` marker, so that
`pytest -m chaos` runs the tier alone; `hack/test.sh` runs it with everything else."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/chaos/" in item.nodeid:
            item.add_marker(pytest.mark.chaos)
