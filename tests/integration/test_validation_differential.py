"""Local validation and the real API server agree on thousands of generated jobs (issue 12, item 5).

Hypothesis (derandomized: the same jobs on every run) mutates the examples and minimal jobs of all three
kinds: unknown fields at any depth, wrong types, nulls, bad enum values, negative and huge numbers, bad
names and labels, removed fields, and violations of the CRDs' CEL rules. Each job goes both to
`kubetrain.api.servercheck.server_errors` (what `run --local`, `submit` and `TrainingClient` check first)
and to the real API server with `dryRun=All&fieldValidation=Strict` (what `kubectl apply` does).

Asserted: zero disagreements on accept/reject; every field the server names in a rejection is named
locally too; and the whole local check (`parse_valid_job`: the server's layer, then kubetrain's semantic
validation) rejects every job the server rejects. The jobs the server accepts but the semantic layer
refuses are kubetrain's deliberate extras (e.g. a container the operator configures must exist, an image is
required, the env the operator owns cannot be set); the test prints how many and which fields.
"""

from __future__ import annotations

import collections
import copy
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kubetrain.api import KINDS, InvalidJobError
from kubetrain.api.load import parse_valid_job
from kubetrain.api.servercheck import server_errors
from kubetrain.testing.controlplane import ControlPlane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
JOBS = 2400
Job = dict[str, Any]


def _examples() -> list[Job]:
    jobs = []
    for path in sorted((ROOT / "examples").glob("*/*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") in {info.kind for info in KINDS}:
                document.get("metadata", {}).pop("namespace", None)
                jobs.append(document)
    return jobs


def _minimal(kind: str) -> Job:
    info = next(info for info in KINDS if info.kind == kind)
    container = {"name": info.default_container_name or "main", "image": "busybox:1.36"}
    specs = {
        rtype: {"replicas": 1, "template": {"spec": {"containers": [dict(container)]}}}
        for rtype in info.replica_types[:2]
    }
    return {
        "apiVersion": info.api_version,
        "kind": kind,
        "metadata": {"name": f"min-{kind.lower()}"},
        "spec": {info.replica_specs_field: specs},
    }


BASES = [*_examples(), *(_minimal(info.kind) for info in KINDS)]
UNKNOWN = st.sampled_from(["bogusField", "replica", "imagePullPolicyy", "x", "Spec"])
WRONG = st.sampled_from(["x", "", 1, -1, True, 1.5, [], {}, ["a"], {"a": 1}, None])
NUMBERS = st.sampled_from([-1, 0, 1, 2, 10_000, 10_001, 65_536, 2**31 - 1, 2**31, -(2**31) - 1, 2**62])
NAMES = st.sampled_from(
    ["UPPER", "a_b", "-a", "a-", "9abc", "a.b", "", "ok", "a" * 63, "a" * 64, "a" * 50, "x" * 254, "é"]
)
ENUMS = {
    "imagePullPolicy": ["Sometimes", "Always", "never"],
    "restartPolicy": ["Sometimes", "Never", "OnFailure", "ExitCode", "Always"],
    "cleanPodPolicy": ["Some", "All", "None", "Running"],
    "protocol": ["TCP", "HTTP", "udp"],
    "nprocPerNode": ["auto", "gpu", "0", "2", "-1", "two", "1234567890123"],
    "managedBy": ["kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue", "someone/else", ""],
    "implementation": ["OpenMPI", "Intel", "MPICH", "LAM"],
}


def _paths(node: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*here, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out.extend(_paths(value, (*here, index)))
    return out


def _at(job: Job, path: tuple[Any, ...]) -> Any:
    node: Any = job
    for part in path:
        node = node[part]
    return node


def _set(job: Job, path: tuple[Any, ...], value: Any) -> None:
    _at(job, path[:-1])[path[-1]] = value


def _specs(job: Job) -> dict[str, Any]:
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return {}
    found = next((v for k, v in spec.items() if k.endswith("ReplicaSpecs") and isinstance(v, dict)), {})
    return found if isinstance(found, dict) else {}


def _cel_violation(draw: st.DrawFn, job: Job) -> None:
    specs = _specs(job)
    choice = draw(st.integers(0, 6))
    if choice == 0 and specs:
        specs[draw(st.sampled_from(["Bogus", "worker", "WORKER", "Evaluator", "Launcher", "Chief"]))] = (
            copy.deepcopy(next(iter(specs.values())))
        )
    elif choice == 1 and specs:
        first = draw(st.sampled_from(sorted(specs)))
        if isinstance(specs[first], dict):
            specs[first]["replicas"] = draw(st.sampled_from([0, 2, 3]))
    elif choice == 2 and specs:
        del specs[draw(st.sampled_from(sorted(specs)))]
    elif choice == 3:
        job["spec"]["elasticPolicy"] = {
            "minReplicas": draw(st.integers(-1, 5)),
            "maxReplicas": draw(st.integers(-1, 5)),
            **draw(st.sampled_from([{}, {"nProcPerNode": 2}, {"rdzvPort": 70000}])),
        }
    elif choice == 4:
        job["spec"]["slotsPerWorker"] = draw(st.sampled_from([0, 1, -1, 2000]))
    elif choice == 5:
        _mapping(job["spec"], "runPolicy")["managedBy"] = draw(st.sampled_from(ENUMS["managedBy"]))
    else:
        job["metadata"]["name"] = "n" * draw(st.integers(40, 70))


@st.composite
def jobs(draw: st.DrawFn) -> Job:
    """A base job with 0 to 3 mutations."""
    job: Job = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2, 3]))):
        _mutate(draw, job)
    return job


def _mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """parent[key] as a mapping to add to; an earlier mutation may have made it a scalar or a list."""
    if not isinstance(parent.get(key), dict):
        parent[key] = {}
    found: dict[str, Any] = parent[key]
    return found


def _pick(draw: st.DrawFn, candidates: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    return draw(st.sampled_from(candidates)) if candidates else None


def _mutate(draw: st.DrawFn, job: Job) -> None:
    paths = _paths(job)
    operation = draw(st.integers(0, 8))
    if operation >= 5 and not (isinstance(job.get("metadata"), dict) and isinstance(job.get("spec"), dict)):
        return
    if operation == 0:  # an unknown field in any mapping
        target = draw(st.sampled_from([p for p in paths if isinstance(_at(job, p), dict)]))
        _at(job, target)[draw(UNKNOWN)] = copy.deepcopy(draw(WRONG))
    elif operation == 1:  # a wrong type (or null) anywhere
        target = _pick(draw, [p for p in paths if p and p[0] not in ("apiVersion", "kind")])
        if target is not None:
            _set(job, target, copy.deepcopy(draw(WRONG)))
    elif operation == 2:  # numbers out of range
        numeric = [p for p in paths if isinstance(_at(job, p), int) and not isinstance(_at(job, p), bool)]
        if numeric:
            _set(job, draw(st.sampled_from(numeric)), draw(NUMBERS))
    elif operation == 3:  # a removed field (required ones included)
        target = _pick(draw, [p for p in paths if len(p) > 1 and p[0] not in ("apiVersion", "kind")])
        if target is not None:
            del _at(job, target[:-1])[target[-1]]
    elif operation == 4:  # an enum-like value
        keyed = [p for p in paths if p and p[-1] in ENUMS]
        if keyed:
            target = draw(st.sampled_from(keyed))
            _set(job, target, draw(st.sampled_from(ENUMS[target[-1]])))
        else:
            _container(job).update(imagePullPolicy=draw(st.sampled_from(ENUMS["imagePullPolicy"])))
    elif operation == 5:
        job["metadata"]["name"] = draw(NAMES)
    elif operation == 6:
        _mapping(job["metadata"], "labels")[draw(st.sampled_from(["a b", "ok", "x/y", "-a"]))] = draw(
            st.sampled_from(["v", "", "bad value", "a" * 64])
        )
    else:
        _cel_violation(draw, job)


def _container(job: Job) -> dict[str, Any]:
    """The first container that is still a mapping (an earlier mutation may have made one anything)."""
    for spec in _specs(job).values():
        try:
            container = spec["template"]["spec"]["containers"][0]
        except (KeyError, IndexError, TypeError):
            continue
        if isinstance(container, dict):
            return container
    return {}


def generate() -> list[Job]:
    found: list[Job] = []

    @settings(
        max_examples=JOBS,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(jobs())
    def collect(job: Job) -> None:
        found.append(job)

    collect()
    return found


# ---------------------------------------------------------------- the server's answer, as field paths

_UNKNOWN = re.compile(r'unknown field "([^"]+)"')
_IN_PATH = re.compile(r"format \w+ in (\S+)$")
_KEY = re.compile(r"\[([^\]\d\"][^\]]*)\]")


def normalize(path: str) -> str:
    """`a[Worker].b["x/y"]` and `a.Worker.b.x/y` compare equal."""
    path = re.sub(r'\["([^"]*)"\]', r".\1", path)
    return _KEY.sub(r".\1", path).lstrip(".")


def server_fields(status: int, body: Any) -> set[str]:
    message = str(body.get("message", ""))
    fields = {normalize(m) for m in _UNKNOWN.findall(message)}
    for cause in (body.get("details") or {}).get("causes", []):
        field = cause.get("field", "")
        if field and field != "<nil>":
            fields.add(normalize(field))
        found = _IN_PATH.search(cause.get("message", ""))
        if found:
            fields.add(normalize(found.group(1)))
    return fields


def _send(plane: ControlPlane, namespace: str, job: Job) -> tuple[int, Any]:
    info = next(info for info in KINDS if info.kind == job["kind"])
    path = f"/apis/{info.group}/{info.version}/namespaces/{namespace}/{info.plural}"
    return plane.rest.request("POST", f"{path}?dryRun=All&fieldValidation=Strict", job, timeout=60)


def _local_full(job: Job) -> list[str]:
    try:
        parse_valid_job(job)
    except InvalidJobError as error:
        return [normalize(e.path) for e in error.errors]
    return []


def test_local_validation_equals_the_api_servers(crds: ControlPlane, namespace: str) -> None:
    started = time.monotonic()
    generated = generate()
    local = [server_errors(job) for job in generated]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda job: _send(crds, namespace, job), generated))
    disagreements: list[str] = []
    unnamed: list[str] = []
    extras: collections.Counter[str] = collections.Counter()
    for job, errors, (status, body) in zip(generated, local, answers, strict=True):
        assert status in (200, 201, 400, 422), (status, body)
        accepted = status < 300
        if accepted == bool(errors):
            disagreements.append(
                f"server {status}: {body.get('message')}\n  local: {errors}\n  {json.dumps(job)}"
            )
            continue
        full = _local_full(job)
        if accepted:
            extras.update(set(full))
            continue
        assert full, f"the full local check accepts a job the server rejects: {json.dumps(job)}"
        missing = server_fields(status, body) - {normalize(e.path) for e in errors}
        if missing:
            unnamed.append(f"{sorted(missing)} not named locally: {body.get('message')}\n  local: {errors}")
    total, accepted_count = len(generated), sum(1 for status, _ in answers if status < 300)
    rejected = total - accepted_count
    print(
        f"\n{total} jobs: server accepted {accepted_count}, rejected {rejected}; "
        f"agreement {total - len(disagreements)}/{total}; "
        f"rejections whose fields local validation names: {rejected - len(unnamed)}/{rejected}; "
        f"{time.monotonic() - started:.1f} s"
    )
    print(f"deliberate extras (server accepts, kubetrain's semantic checks refuse), by field: {dict(extras)}")
    assert not disagreements, f"{len(disagreements)} disagreements:\n" + "\n".join(disagreements[:10])
    assert not unnamed, f"{len(unnamed)} rejections name other fields:\n" + "\n".join(unnamed[:10])
    assert total >= 2000
    assert accepted_count >= 200 and rejected >= 1000


def test_the_generated_jobs_are_fixed_and_varied() -> None:
    first, second = generate(), generate()
    assert first == second  # derandomized: every run checks the same jobs
    kinds = collections.Counter(job["kind"] for job in first)
    assert set(kinds) == {info.kind for info in KINDS}
