"""The names a new project derives from its kind, and the templates filled with them.

Templates are files under `templates/` with `{{name}}` placeholders; `package/` becomes the Python package's
directory. The CRD is not a template: it is rendered from the generated model itself, by the generated
project's own `crds` command, so that the file and the command can never disagree.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kubetrain import __version__

__all__ = ["ProjectNames", "render_project", "write_project"]

_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@dataclass(frozen=True)
class ProjectNames:
    """A kind's names, checked: `ValueError` names the bad argument and the fix."""

    kind: str
    group: str
    replica_types: tuple[str, ...]
    version: str = "v1"

    def __post_init__(self) -> None:
        if not _KIND.match(self.kind):
            raise ValueError(
                f"kind {self.kind!r}: write it in CamelCase, starting with a capital, e.g. SleepJob"
            )
        if not _GROUP.match(self.group) or self.group == "kubeflow.org":
            raise ValueError(f"--group {self.group!r}: write a DNS domain you own, e.g. example.dev")
        if not self.replica_types or any(not _KIND.match(t) for t in self.replica_types):
            raise ValueError(
                f"--replica-types {','.join(self.replica_types)!r}: write CamelCase names, e.g. Worker or "
                "Master,Worker"
            )
        if not _VERSION.match(self.version):
            raise ValueError(
                f"--version {self.version!r}: write a Kubernetes API version, e.g. v1 or v1alpha1"
            )

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def prefix(self) -> str:
        """`sleep` for SleepJob: the replica-specs field is `sleep_replica_specs` (`sleepReplicaSpecs`)."""
        stem = self.kind[:-3] if self.kind.endswith("Job") and len(self.kind) > 3 else self.kind
        return re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower()

    def values(self) -> dict[str, str]:
        camel = "".join(part.capitalize() for part in self.prefix.split("_"))
        constants = [_constant(t) for t in self.replica_types]
        return {
            "Kind": self.kind,
            "KIND": self.singular.upper(),
            "singular": self.singular,
            "package": self.singular,
            "plural": self.singular + "s",
            "group": self.group,
            "version": self.version,
            "prefix": self.prefix,
            "specs_field": camel[0].lower() + camel[1:] + "ReplicaSpecs",
            "container": self.prefix.replace("_", "-"),
            "crd_file": f"{self.singular}s.{self.group}.yaml",
            "replica_constants": "\n".join(
                f'{c} = "{t}"' for c, t in zip(constants, self.replica_types, strict=True)
            ),
            "replica_names": "".join(f"{c}, " for c in constants).rstrip(" "),
            "replica_list": ", ".join(self.replica_types),
            "sample_replicas": "\n".join(self._sample(t) for t in self.replica_types),
            "kubetrain_version": __version__,
        }

    def _sample(self, rtype: str) -> str:
        lines = [
            f"{rtype}:",
            "  replicas: 1",
            "  template:",
            "    metadata:",
            "      annotations:",
            "        # Read only by kubetrain's test plane (kwok): the pod runs 1 s, then succeeds.",
            "        sim.kubetrain.dev/run-for: 1s",
            "    spec:",
            "      containers:",
            f"      - name: {self.prefix.replace('_', '-')}",
            "        image: docker.io/library/busybox:1.36",
            '        command: [sh, -c, "sleep 1"]',
        ]
        return "\n".join("    " + line for line in lines)


def _constant(rtype: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", rtype).upper()


def render_project(names: ProjectNames) -> dict[Path, str]:
    """Relative path -> text of every templated file of the project."""
    values = names.values()
    root = resources.files("kubetrain.cli.scaffold") / "templates"
    files: dict[Path, str] = {}
    for template in _walk(Path(str(root))):
        relative = template.relative_to(Path(str(root))).with_suffix("")
        if relative.parts[0] == "package":
            relative = Path(values["package"], *relative.parts[1:])
        if relative == Path("examples/sample.yaml"):
            relative = Path("examples", f"{values['singular']}.yaml")
        text = _PLACEHOLDER.sub(lambda m: values[m.group(1)], template.read_text(encoding="utf-8"))
        files[relative] = text
    return files


def _walk(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*.tmpl") if path.is_file())


def write_project(names: ProjectNames, directory: Path) -> list[Path]:
    """Write the project into `directory` (which must not exist, or be empty), its CRD included; returns
    the paths written."""
    if directory.exists() and any(directory.iterdir()):
        raise ValueError(f"--dir {directory}: it is not empty; name a new directory")
    written = []
    for relative, text in render_project(names).items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    crd = directory / "config" / "crd" / names.values()["crd_file"]
    crd.parent.mkdir(parents=True, exist_ok=True)
    crd.write_text(_crd_of(names, directory), encoding="utf-8")
    return [*written, crd]


def _crd_of(names: ProjectNames, directory: Path) -> str:
    """The CRD, as the new project's own `crds` command prints it."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(directory), os.environ.get("PYTHONPATH")) if p),
    }
    done = subprocess.run(
        [sys.executable, "-m", names.values()["package"], "crds"],
        cwd=directory, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the new project's `crds` command failed:\n{done.stderr}")
    return done.stdout
