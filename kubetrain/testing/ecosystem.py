"""Where `hack/ecosystem.sh` puts the ecosystem components (Kueue, the scheduler-plugins scheduler, ...),
found by the same rule as that script, from the one list of pinned versions.

`tools/ecosystem/components.txt` names each component's Go module, version and main package. The build of
`<name>` at `<version>` lives in `${KUBETRAIN_ECOSYSTEM_DIR:-${XDG_CACHE_HOME:-~/.cache}/kubetrain/ecosystem}/
<name>-<version>/`: the binary in `bin/<name>`, the module tree it was built from in `src/` (the CRDs and
webhook manifests the tests install come from there, so they always match the binary), and `stamp`, written
last. A test that needs a component that is not built fails and names the command that builds it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kubetrain.testing.binaries import repo_root

__all__ = [
    "BUILD_HINT",
    "Component",
    "MissingComponentError",
    "built",
    "components",
    "ecosystem_dir",
    "find_component",
    "parse_listing",
]

BUILD_HINT = "run `bash hack/ecosystem.sh` (builds them from their Go modules; a few minutes each, cold)"


class MissingComponentError(RuntimeError):
    """An ecosystem component is unknown or not built."""


@dataclass(frozen=True)
class Component:
    """One pinned component and where its build lives."""

    name: str
    module: str
    version: str
    package: str
    directory: Path

    @property
    def binary(self) -> Path:
        return self.directory / "bin" / self.name

    @property
    def source(self) -> Path:
        """The module tree the binary was built from (read-only use: manifests, CRDs)."""
        return self.directory / "src"

    @property
    def built(self) -> bool:
        return (self.directory / "stamp").is_file() and os.access(self.binary, os.X_OK)


def ecosystem_dir(env: dict[str, str] | None = None) -> Path:
    """The cache root (it may not exist yet)."""
    env = dict(os.environ) if env is None else env
    if env.get("KUBETRAIN_ECOSYSTEM_DIR"):
        return Path(env["KUBETRAIN_ECOSYSTEM_DIR"])
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "kubetrain" / "ecosystem"


def components(env: dict[str, str] | None = None) -> dict[str, Component]:
    """Every component of tools/ecosystem/components.txt, by name."""
    listing = repo_root() / "tools" / "ecosystem" / "components.txt"
    try:
        return parse_listing(listing.read_text(), ecosystem_dir(env), source=str(listing))
    except ValueError as err:
        raise MissingComponentError(str(err)) from err


def parse_listing(text: str, root: Path, *, source: str) -> dict[str, Component]:
    """The Go programs a list names (`name module version package` a line, `#` comments), each built under
    `root/<name>-<version>/`; ValueError on a bad line. Also the format of the benchmark's peers list."""
    found: dict[str, Component] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 4:
            raise ValueError(f"{source}:{number}: want `name module version package`, got {raw!r}")
        name, module, version, package = fields
        found[name] = Component(name, module, version, package, root / f"{name}-{version}")
    return found


def find_component(name: str, env: dict[str, str] | None = None) -> Component:
    """The built component `name`, or MissingComponentError saying how to build it."""
    return built(components(env), name, what="ecosystem component", hint=BUILD_HINT)


def built(known: dict[str, Component], name: str, *, what: str, hint: str) -> Component:
    """`known[name]` when it is built, else MissingComponentError naming it and `hint` (how to build it)."""
    if name not in known:
        raise MissingComponentError(f"no {what} {name!r}; known: {', '.join(sorted(known))}")
    component = known[name]
    if not component.built:
        raise MissingComponentError(
            f"{name} {component.version} is not built in {component.directory}; {hint}"
        )
    return component
