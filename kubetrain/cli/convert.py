"""`kubetrain convert PATH...`: training-operator MPIJobs (`kubeflow.org/v1`) to `kubeflow.org/v2beta1`.

Takes files, directories (every *.yaml, *.yml and *.json below, in name order) and `-` (standard input);
a file may hold several documents, a `kind: List` or an `MPIJobList`. Each v1 MPIJob is converted
(`kubetrain.api.convert`) and then validated like any job kubetrain serves; every other document is kept as
it is, so a file with a Namespace beside its job stays whole. What the conversion changed, dropped or wants
checked goes to standard error, one line each, naming the file, the job and the v1 field.

All or nothing: if any input cannot be read or any converted job is invalid, nothing is written (exit 2
for unreadable input, 1 for an invalid result). Output: the converted stream on standard output, or with
`--output-dir DIR` one file per input file under DIR (same relative name).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubetrain.api import InvalidJobError, parse_job
from kubetrain.api.convert import convert_mpijob_v1, is_mpijob_v1
from kubetrain.api.load import MAX_INPUT_BYTES, decode_job_bytes, load_documents
from kubetrain.api.validation import check_job
from kubetrain.cli.exitcodes import ExitCode

__all__ = ["register", "run"]

_SUFFIXES = (".yaml", ".yml", ".json")
_LISTS = ("List", "MPIJobList")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `convert` sub-command."""
    parser = subparsers.add_parser(
        "convert",
        help="convert training-operator MPIJobs (kubeflow.org/v1) to kubeflow.org/v2beta1",
        description=(
            "Convert kubeflow.org/v1 MPIJobs (files, directories, - for stdin) to kubeflow.org/v2beta1. "
            "Other documents are kept as they are. Notes on what changed go to stderr."
        ),
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="YAML/JSON files or directories; - is stdin")
    parser.add_argument(
        "--output-dir", type=Path, help="write one converted file per input file here instead of to stdout"
    )
    parser.set_defaults(handler=run)


@dataclass
class _File:
    """One input file: where it came from, its relative name for --output-dir, its converted documents."""

    source: str
    relative: Path
    documents: list[Any] = field(default_factory=list)


class _InputError(Exception):
    """An input that cannot be read as YAML documents (exit 2)."""


def run(args: argparse.Namespace) -> int:
    """Convert; returns the exit code."""
    try:
        files = [_read(source, relative) for source, relative in _inputs(args.paths)]
    except _InputError as error:
        print(f"kubetrain convert: {error}", file=sys.stderr)
        return int(ExitCode.USAGE)
    converted, problems = 0, list[str]()
    for file in files:
        for index, document in enumerate(file.documents):
            if not is_mpijob_v1(document):
                continue
            outcome = convert_mpijob_v1(document)
            name = f"{file.source}: MPIJob {_name(document)!r}"
            for note in outcome.notes:
                print(f"{name}: {note}", file=sys.stderr)
            problems.extend(f"{name}: {e}" for e in _errors(outcome.job))
            file.documents[index] = outcome.job
            converted += 1
    if problems:
        print("kubetrain convert: the converted jobs are not valid; nothing written:", file=sys.stderr)
        print("\n".join(f"  {p}" for p in problems), file=sys.stderr)
        return int(ExitCode.FAILED)
    if converted == 0:
        print("kubetrain convert: no kubeflow.org/v1 MPIJob found; nothing to convert", file=sys.stderr)
        return int(ExitCode.USAGE)
    _write(files, args.output_dir)
    print(f"kubetrain convert: converted {converted} MPIJob(s) to kubeflow.org/v2beta1", file=sys.stderr)
    return int(ExitCode.OK)


def _inputs(paths: Sequence[str]) -> Iterator[tuple[str, Path]]:
    for raw in paths:
        if raw == "-":
            yield raw, Path("stdin.yaml")
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
            if not found:
                raise _InputError(f"{raw}: no *.yaml, *.yml or *.json file in this directory")
            yield from ((str(p), p.relative_to(path)) for p in found)
        elif path.is_file():
            yield raw, Path(path.name)
        else:
            raise _InputError(f"{raw}: no such file or directory")


def _read(source: str, relative: Path) -> _File:
    try:  # the limits every job reader has (size, UTF-8, nesting): kubetrain.api.load
        if source == "-":
            stream = getattr(sys.stdin, "buffer", None)  # None when stdin was replaced by a text stream
            data = stream.read(MAX_INPUT_BYTES + 1) if stream is not None else sys.stdin.read().encode()
        else:
            data = Path(source).read_bytes()
        documents = load_documents(decode_job_bytes(data, source))
    except OSError as error:
        raise _InputError(f"{source}: {error.strerror or error}") from None
    except InvalidJobError as error:
        raise _InputError(f"{source}: {'; '.join(str(e) for e in error.errors)}") from None
    return _File(source, relative, [item for document in documents for item in _unpacked(document)])


def _unpacked(document: Any) -> list[Any]:
    if isinstance(document, Mapping) and document.get("kind") in _LISTS:
        items = document.get("items")
        return list(items) if isinstance(items, list) else [document]
    return [document]


def _errors(job: dict[str, Any]) -> list[str]:
    try:
        check_job(parse_job(job))
    except InvalidJobError as error:
        return [str(e) for e in error.errors]
    return []


def _name(document: Mapping[str, Any]) -> str:
    metadata = document.get("metadata")
    return str(metadata.get("name", "")) if isinstance(metadata, Mapping) else ""


def _dump(documents: list[Any]) -> str:
    return "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in documents)


def _write(files: list[_File], output_dir: Path | None) -> None:
    if output_dir is None:
        sys.stdout.write("---\n".join(_dump(f.documents) for f in files if f.documents))
        return
    for file in files:
        target = output_dir / file.relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_dump(file.documents), encoding="utf-8")
