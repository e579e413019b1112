"""`kubetrain crds`: write (or `--check`) the generated CustomResourceDefinitions in manifests/crds/.

The CRDs are generated from the API models (`kubetrain.api.crd`); this command only does the file work:
write each manifest, or, with `--check`, compare the files on disk with a fresh generation and name the
ones that differ (exit 1), so CI catches a model change that was not followed by `kubetrain crds`.
The same schemas are also written as JSON into the package (`kubetrain/api/crdschemas/`), where local
validation reads them (`kubetrain.api.servercheck`), and checked alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import kubetrain.api
from kubetrain.api.crd import generate_crds
from kubetrain.api.podschema import SchemaSourceError
from kubetrain.api.servercheck import SCHEMA_DIR, generated_schemas

__all__ = ["DEFAULT_OUTPUT_DIR", "register", "run"]

DEFAULT_OUTPUT_DIR = Path("manifests/crds")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `crds` sub-command."""
    parser = subparsers.add_parser(
        "crds",
        help="generate the CRD manifests from the API models",
        description=(
            "Write the TFJob, PyTorchJob, MPIJob, JAXJob, XGBoostJob and PaddleJob CRDs, generated from the "
            "API models."
        ),
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=DEFAULT_OUTPUT_DIR,
        help=f"directory of the CRD manifests (default: {DEFAULT_OUTPUT_DIR})",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and name the files that differ from a fresh generation",
    )
    parser.set_defaults(handler=run)


PACKAGE_SCHEMA_DIR = Path(kubetrain.api.__file__).parent / SCHEMA_DIR


def _generate() -> tuple[dict[str, str], dict[str, str]] | None:
    # The Kubernetes schemas come from a dev dependency; without it, say so instead of a traceback.
    try:
        return generate_crds(), generated_schemas()
    except SchemaSourceError as exc:
        print(f"kubetrain crds: {exc}", file=sys.stderr)
        return None


def _differing(output_dir: Path, manifests: dict[str, str]) -> list[Path]:
    differing = []
    for name, text in manifests.items():
        path = output_dir / name
        if not path.is_file() or path.read_bytes() != text.encode("utf-8"):
            differing.append(path)
    return differing


def run(args: argparse.Namespace) -> int:
    """Generate the CRDs and write or check them; returns the exit code."""
    output_dir: Path = args.output_dir
    generated = _generate()
    if generated is None:
        return 2
    manifests, schemas = generated
    if args.check:
        differing = _differing(output_dir, manifests) + _differing(PACKAGE_SCHEMA_DIR, schemas)
        for path in differing:
            print(f"{path}: differs from the models; run `kubetrain crds` and commit it", file=sys.stderr)
        return 1 if differing else 0
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        for name, text in manifests.items():
            (output_dir / name).write_bytes(text.encode("utf-8"))
        for name, text in schemas.items():
            (PACKAGE_SCHEMA_DIR / name).write_bytes(text.encode("utf-8"))
    except OSError as exc:
        print(f"kubetrain crds: cannot write to {output_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for name in manifests:
        print(output_dir / name)
    return 0
