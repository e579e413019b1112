"""`kubetrain new-operator KIND --group G --replica-types A,B`: a new operator project, as kubebuilder
gives Go users (see `kubetrain.cli.scaffold` for what it holds)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kubetrain.cli.exitcodes import ExitCode
from kubetrain.cli.scaffold import ProjectNames, write_project

__all__ = ["behind_import_hook", "register"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "new-operator",
        help="write a new operator project for a kind of your own",
        description="Write a project with an operator for KIND on kubetrain.common: model, KindInfo, "
        "controller with stubbed hooks, main and crds commands, a test on the test control plane, a "
        "Containerfile and kustomize manifests.",
    )
    parser.add_argument("kind", metavar="KIND", help="the kind, in CamelCase, e.g. SleepJob")
    parser.add_argument(
        "--group", required=True, help="the API group, a DNS domain you own, e.g. example.dev"
    )
    parser.add_argument(
        "--replica-types", required=True, help="comma-separated replica types, e.g. Sleeper or Master,Worker"
    )
    parser.add_argument("--version", default="v1", dest="api_version", help="the API version (default v1)")
    parser.add_argument(
        "--dir", type=Path, help="where to write it (default: ./<kind in lower case>-operator)"
    )
    parser.set_defaults(handler=_new_operator)


def _new_operator(args: argparse.Namespace) -> int:
    types = tuple(t.strip() for t in args.replica_types.split(",") if t.strip())
    try:
        names = ProjectNames(args.kind, args.group, types, args.api_version)
        directory = args.dir or Path(f"{names.singular}-operator")
        written = write_project(names, directory)
    except ValueError as err:
        print(f"kubetrain new-operator: {err}", file=sys.stderr)
        return int(ExitCode.USAGE)
    print(f"wrote {len(written)} files to {directory}; next: cd {directory} && pytest && mypy")
    if behind_import_hook():
        print(_IMPORT_HOOK_NOTE, file=sys.stderr)
    return int(ExitCode.OK)


_IMPORT_HOOK_NOTE = (
    "note: this kubetrain is an editable install reached through an import hook, which mypy cannot follow: "
    "the project's mypy would report kubetrain as missing. Reinstall it from its checkout "
    "(`pip install -e .` there, or `bash hack/setup.sh`), which now installs it as a plain path."
)


def behind_import_hook() -> bool:
    """Whether kubetrain is found through setuptools' editable-install finder (not a path mypy reads)."""
    return any(
        getattr(finder, "__module__", "").startswith("__editable___kubetrain") for finder in sys.meta_path
    )
