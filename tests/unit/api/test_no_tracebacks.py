"""Bad input never becomes a traceback: any one field of any example replaced by a wrong value gives
either a valid job or `InvalidJobError`, through parsing, defaulting and validation alike."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import InvalidJobError, check_job, parse_job

EXAMPLES = sorted(
    path
    for path in (Path(__file__).resolve().parents[3] / "examples").rglob("*.yaml")
    if "operators" not in path.parts  # examples/operators: projects of kinds of one's own, not built-in jobs
)
ODD_VALUES: list[Any] = [None, -1, 0, "", "x", True, [], {}, [None], {"k": None}, 10**12]


def leaf_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path in a decoded document: the containers too, not only their leaves."""
    if path:
        yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaf_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from leaf_paths(value, (*path, index))


def replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_any_single_bad_value_is_reported_not_raised(path: Path) -> None:
    doc = next(
        d for d in yaml.safe_load_all(path.read_text()) if d and d["apiVersion"].startswith("kubeflow.org/")
    )  # a file may carry a PVC too
    tried = 0
    for where in leaf_paths(doc):
        for value in ODD_VALUES:
            try:
                check_job(parse_job(replaced(doc, where, value)))
            except InvalidJobError as error:
                assert error.errors and all(e.message for e in error.errors)
            tried += 1
    assert tried > 100
