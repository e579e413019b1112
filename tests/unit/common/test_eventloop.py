"""The operator process's event loop: uvloop by default, asyncio's on request, a typo refused."""

from __future__ import annotations

import asyncio
import builtins
import gc
from typing import Any

import pytest
import uvloop

from kubetrain.common import eventloop
from kubetrain.common.eventloop import EVENT_LOOP_ENV, EventLoopChoiceError


async def _loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


@pytest.fixture(autouse=True)
def _unfreeze() -> Any:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()  # run() freezes what exists; give this test process's objects back to the collector
    gc.set_threshold(*thresholds)


def test_uvloop_runs_the_operator_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    assert eventloop.run(_loop_type()) is uvloop.Loop


def test_asyncio_loop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "asyncio")
    assert not issubclass(eventloop.run(_loop_type()), uvloop.Loop)


def test_a_misspelt_choice_is_refused_naming_the_variable_and_the_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "uvlopp")
    with pytest.raises(EventLoopChoiceError) as raised:
        eventloop.run(_loop_type())
    assert str(raised.value) == (
        "KUBETRAIN_EVENT_LOOP='uvlopp' is not an event loop: set it to uvloop or asyncio, "
        "or unset it for uvloop"
    )


def test_asyncio_loop_where_uvloop_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_uvloop(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "uvloop":
            raise ImportError("No module named 'uvloop'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    monkeypatch.setattr(builtins, "__import__", no_uvloop)
    assert eventloop.chosen_loop() == "asyncio"


def test_objects_made_before_the_loop_are_frozen_out_of_the_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    gc.unfreeze()
    eventloop.run(_loop_type())
    assert gc.get_freeze_count() > 0


def test_the_young_collection_runs_less_often_while_the_loop_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    gc.set_threshold(700, 10, 10)

    async def thresholds() -> tuple[int, ...]:
        return gc.get_threshold()

    assert eventloop.run(thresholds()) == (eventloop.YOUNG_THRESHOLD, 10, 10)
    assert eventloop.YOUNG_THRESHOLD > 700
