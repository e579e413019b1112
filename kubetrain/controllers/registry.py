"""Which controller serves which kind: the map the operator entry point turns `--enable` into controllers.

Entries name a module and a class instead of importing them, so that reading the list (for `--help`,
for validating flags) costs nothing, and so that a kind whose controller is missing or broken fails
loudly when, and only when, it is enabled: `load_controller` raises `ControllerUnavailable` naming the
kind and the import error. A kind is never dropped silently.

Names are matched case-insensitively against the kind (`TFJob`), its plural (`tfjobs`) and its singular
(`tfjob`); a typo gets a "did you mean" suggestion.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, final

from kubetrain.api import JAXJOB, MPIJOB, PADDLEJOB, PYTORCHJOB, TFJOB, XGBOOSTJOB, KindInfo

if TYPE_CHECKING:  # the controllers' machinery is imported on `load()`, not to read the list
    from kubetrain.controllers.settings import ConfiguredJobController

__all__ = [
    "CONTROLLERS",
    "ControllerEntry",
    "ControllerUnavailable",
    "UnknownKind",
    "load_controller",
    "resolve_kinds",
]


class UnknownKind(ValueError):
    """A name in `--enable` is not a kind this operator serves."""


class ControllerUnavailable(RuntimeError):
    """The controller of an enabled kind cannot be imported (missing module, class, or a broken import)."""


@final
@dataclass(frozen=True, slots=True)
class ControllerEntry:
    """Where the controller of one kind lives: `module:attribute`, imported on first use."""

    kind: KindInfo
    module: str
    attribute: str

    @property
    def names(self) -> frozenset[str]:
        """The lower-case spellings `--enable` accepts for this kind."""
        return frozenset({self.kind.kind.lower(), self.kind.plural, self.kind.singular})

    def load(self) -> type[ConfiguredJobController[Any]]:
        """Import the controller class; ControllerUnavailable (naming the kind) if that fails."""
        from kubetrain.controllers.settings import ConfiguredJobController  # noqa: PLC0415

        where = f"{self.module}.{self.attribute}"
        try:
            module = importlib.import_module(self.module)
        except ImportError as err:
            raise ControllerUnavailable(
                f"{self.kind.kind}: cannot import its controller {where}: {err}"
            ) from err
        cls = getattr(module, self.attribute, None)
        if not (isinstance(cls, type) and issubclass(cls, ConfiguredJobController)):
            raise ControllerUnavailable(
                f"{self.kind.kind}: {where} is missing or is not a ConfiguredJobController subclass"
            )
        if cls.kind != self.kind:
            raise ControllerUnavailable(
                f"{self.kind.kind}: {where} serves {cls.kind.kind}, not {self.kind.kind}"
            )
        return cls


CONTROLLERS: Mapping[str, ControllerEntry] = MappingProxyType(
    {
        entry.kind.kind: entry
        for entry in (
            ControllerEntry(TFJOB, "kubetrain.controllers.tensorflow", "TFJobController"),
            ControllerEntry(PYTORCHJOB, "kubetrain.controllers.pytorch", "PyTorchJobController"),
            ControllerEntry(MPIJOB, "kubetrain.controllers.mpi.controller", "MPIJobController"),
            ControllerEntry(JAXJOB, "kubetrain.controllers.jax", "JAXJobController"),
            ControllerEntry(XGBOOSTJOB, "kubetrain.controllers.xgboost", "XGBoostJobController"),
            ControllerEntry(PADDLEJOB, "kubetrain.controllers.paddle", "PaddleJobController"),
        )
    }
)
"""Every kind the operator can serve, by kind name, in the order controllers are started."""


def resolve_kinds(names: Iterable[str]) -> tuple[str, ...]:
    """Canonical kind names for `names` (any case; kind, plural or singular), deduplicated, in registry order.

    UnknownKind names the first unknown entry and suggests the closest known kind.
    """
    wanted: set[str] = set()
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        kind = _lookup(name)
        if kind is None:
            raise UnknownKind(_unknown_message(name))
        wanted.add(kind)
    return tuple(kind for kind in CONTROLLERS if kind in wanted)


def load_controller(kind: str) -> type[ConfiguredJobController[Any]]:
    """The controller class of `kind` (a name from `resolve_kinds`); ControllerUnavailable if absent."""
    return CONTROLLERS[kind].load()


def _lookup(name: str) -> str | None:
    lowered = name.lower()
    for kind, entry in CONTROLLERS.items():
        if lowered in entry.names:
            return kind
    return None


def _unknown_message(name: str) -> str:
    spellings = {spelling: kind for kind, entry in CONTROLLERS.items() for spelling in entry.names}
    close = difflib.get_close_matches(name.lower(), list(spellings), n=1, cutoff=0.6)
    known = ", ".join(CONTROLLERS)
    hint = f"; did you mean {spellings[close[0]]}?" if close else ""
    return f"unknown kind {name!r}{hint} (known kinds: {known})"
