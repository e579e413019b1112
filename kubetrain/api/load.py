"""From YAML text or decoded mappings to typed jobs, and back; every problem becomes a `FieldError`.

The right model is picked by apiVersion and kind. YAML is read as the API server reads it: timestamps stay
strings (PyYAML would turn them into datetimes), duplicate keys are an error (kubectl rejects them too), and
`kind: List` documents are unpacked. Objects of other API groups in the same file (the PersistentVolumeClaim
or ConfigMap a job mounts, as `kubectl apply -f` takes them together) are not jobs: `load_jobs` passes over
them and `other_objects` lists them; a `kubeflow.org` kind kubetrain does not serve is still an error.
`load_valid_jobs` adds defaulting and validation, with the same document numbers in its errors. Pure: text
in, models out; reading files is the caller's business, but `decode_job_bytes` gives every reader the same
limits on what it read (size, UTF-8), and nesting deeper than `MAX_DEPTH` is refused while composing,
before PyYAML's recursive composer can overflow the stack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import yaml
from pydantic import ValidationError

from kubetrain.api.common import TrainingJob
from kubetrain.api.errors import FieldError, InvalidJobError
from kubetrain.api.kinds import KINDS, AnyJob, lookup_kind
from kubetrain.api.validation import check_job
from kubetrain.api.wire_errors import format_path, from_validation_error

__all__ = [
    "MAX_DEPTH",
    "MAX_INPUT_BYTES",
    "decode_job_bytes",
    "dump_jobs",
    "load_documents",
    "load_jobs",
    "load_valid_jobs",
    "other_objects",
    "parse_job",
    "parse_valid_job",
]

_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_JOB_GROUP = "kubeflow.org"

MAX_INPUT_BYTES = 3 * 1024 * 1024
"""The largest job input read (3 MiB): the API server refuses request bodies above this size anyway."""
MAX_DEPTH = 100
"""The deepest nesting of mappings and lists accepted; the deepest real pod template field is ~20 levels."""


class _TooDeepError(yaml.MarkedYAMLError):
    """Nesting beyond `MAX_DEPTH`: reported as such, not as a syntax error."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings, rejects duplicate mapping keys and bounds nesting."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _TooDeepError(None, None, f"nested more than {MAX_DEPTH} levels deep", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}; keep only one", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _served() -> str:
    return ", ".join(f"{info.kind} ({info.api_version})" for info in KINDS)


def parse_job(data: Any) -> AnyJob:
    """The typed job for one decoded object (a mapping with apiVersion and kind). Raises `InvalidJobError`."""
    if not isinstance(data, Mapping):
        raise InvalidJobError(
            [
                FieldError(
                    "",
                    "a job must be a mapping",
                    f"write apiVersion, kind, metadata and spec; served: {_served()}",
                )
            ]
        )
    kind, api_version = data.get("kind"), data.get("apiVersion")
    info = lookup_kind(kind) if isinstance(kind, str) else None
    if info is None:
        problem = "is required" if kind is None else f"{kind!r} is not a kind kubetrain serves"
        raise InvalidJobError([FieldError("kind", problem, f"use one of {_served()}")])
    if api_version != info.api_version:
        problem = "is required" if api_version is None else f"{info.kind} is not served as {api_version!r}"
        fix = f"set apiVersion: {info.api_version}"
        raise InvalidJobError([FieldError("apiVersion", problem, fix)], subject=_subject(data))
    try:
        return cast(AnyJob, info.model.model_validate(dict(data)))
    except ValidationError as error:
        raise InvalidJobError(from_validation_error(error, info.model), subject=_subject(data)) from None


def load_jobs(text: str) -> list[AnyJob]:
    """Every job in a (multi-document) YAML text; empty documents are skipped, `kind: List` is unpacked.

    All documents are read before anything is returned: the `InvalidJobError` lists the errors of every
    bad document, each marked with its document number when there is more than one.
    """
    return _load(text, parse_job)


def load_valid_jobs(text: str) -> list[AnyJob]:
    """Like `load_jobs`, but every job is also checked as the API server checks it (`server_errors`:
    ObjectMeta, the CRD's schema with unknown fields, its CEL rules), then defaulted and validated
    (`check_job`): defaulted jobs."""
    return _load(text, parse_valid_job)


def parse_valid_job(data: Any) -> AnyJob:
    """`parse_job`, checked as `load_valid_jobs` checks each document: the defaulted job.

    kubetrain's own validation speaks first (its messages carry the fix); a job it accepts must then pass
    the API server's checks (`server_errors`), so nothing the server would refuse is accepted here.
    """
    # The API server's checks need the CRD schemas and CEL rules: loaded by the commands that check
    # files (submit, run), not by the operator, which is handed what the API server already admitted.
    from kubetrain.api.servercheck import server_errors  # noqa: PLC0415

    job = check_job(parse_job(data))
    errors = server_errors(data) if isinstance(data, Mapping) else []
    if errors:
        raise InvalidJobError(errors, subject=_subject(data))
    return job


def _load(text: str, parse: Callable[[Any], AnyJob]) -> list[AnyJob]:
    documents = _documents(text)
    jobs: list[AnyJob] = []
    errors: list[FieldError] = []
    for number, document in enumerate(documents, start=1):
        for prefix, item in _items(document):
            if _is_other_object(item):
                continue
            try:
                jobs.append(parse(item))
            except InvalidJobError as error:
                found = [_prefixed(e, prefix) for e in error.errors]
                errors.extend(e.in_document(number) if len(documents) > 1 else e for e in found)
    if errors:
        raise InvalidJobError(errors, subject="the YAML")
    return jobs


def load_documents(text: str) -> list[Any]:
    """The decoded documents of a YAML text, read as `load_jobs` reads them (no `kind: List` unpacking).

    For callers that handle documents other than jobs (e.g. `kubetrain convert`). Raises `InvalidJobError`
    for text that is not YAML.
    """
    return _documents(text)


def other_objects(text: str) -> list[Mapping[str, Any]]:
    """The documents of `text` that are objects of other API groups (not jobs), in order."""
    return [item for document in _documents(text) for _, item in _items(document) if _is_other_object(item)]


def _is_other_object(item: Any) -> bool:
    """A Kubernetes object outside kubeflow.org: apiVersion and kind are strings, the group is another."""
    if not isinstance(item, Mapping):
        return False
    api_version, kind = item.get("apiVersion"), item.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version:
        return False
    group = api_version.rpartition("/")[0]
    return group != _JOB_GROUP and lookup_kind(kind) is None


def dump_jobs(jobs: Iterable[TrainingJob[Any]]) -> str:
    """Jobs as multi-document YAML in their wire form (camelCase, RFC 3339 times), keys in model order."""
    return "---\n".join(yaml.safe_dump(job.to_wire(), sort_keys=False) for job in jobs)


def decode_job_bytes(data: bytes, origin: str) -> str:
    """The text of job input `data` read from `origin` (a file name, `standard input`), within the limits.

    Raises `InvalidJobError` (subject `origin`) when `data` is over `MAX_INPUT_BYTES` or not UTF-8.
    """
    if len(data) > MAX_INPUT_BYTES:
        problem = f"larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB, the most the API server accepts"
        raise _file_error(origin, problem, "split the jobs into several files")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        byte = data[error.start : error.start + 1].hex()
        problem = f"not UTF-8 text (byte 0x{byte} at line {line}, column {column})"
        raise _file_error(origin, problem, "save the file as UTF-8") from None


def _file_error(origin: str, problem: str, fix: str) -> InvalidJobError:
    return InvalidJobError([FieldError("", problem, fix)], subject=origin)


def _documents(text: str) -> list[Any]:
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except (yaml.YAMLError, RecursionError) as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "the YAML"
        if isinstance(error, _TooDeepError | RecursionError):
            problem = f"nested too deeply at {where} (more than {MAX_DEPTH} levels)"
            fix = "a job needs far fewer levels; check the indentation or generated input"
        else:
            problem = f"not valid YAML at {where}: {getattr(error, 'problem', None) or error}"
            fix = "fix the YAML syntax (indentation, colons, quotes)"
        raise InvalidJobError([FieldError("", problem, fix)], subject="the YAML") from None


def _items(document: Any) -> list[tuple[str, Any]]:
    if isinstance(document, Mapping) and document.get("kind") == "List" and "items" in document:
        items = document["items"]
        if isinstance(items, list):
            return [(format_path(("items", index)), item) for index, item in enumerate(items)]
    return [("", document)]


def _prefixed(error: FieldError, prefix: str) -> FieldError:
    if not prefix:
        return error
    path = f"{prefix}.{error.path}" if error.path and not error.path.startswith("[") else prefix + error.path
    return FieldError(path, error.message, error.fix, error.document)


def _subject(data: Mapping[str, Any]) -> str:
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    kind = data.get("kind")
    return f"{kind} {name!r}" if isinstance(name, str) and name else str(kind or "the job")
