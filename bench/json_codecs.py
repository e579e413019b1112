"""JSON codecs beside one another, on what the operator decodes and encodes most: pods.

    python bench/json_codecs.py [--rounds 5] [--count 5000] [--out bench/results/json_codecs.md]

Rows, each the best of --rounds (CPU time of this process, so a loaded machine skews less), per item:
- decode a pod's watch event (a `MODIFIED` line of about 4 KB: labels, an owner, three managedFields
  entries as the API server writes them, one container with ten env vars, status with conditions), as
  `jsonwire.loads` does;
- encode a pod as a create body (the same pod without status and managedFields), as `jsonwire.dumps` does.
Columns: the standard library's json, msgspec (what `kubetrain.common.kube.jsonwire` uses) and, where it
is installed, orjson.

A second table is what an informer pays per event: the whole event decoded, then managedFields dropped
(what it did before), against `jsonwire.loads_watch_event(managed_fields=False)`, which never builds it.
Each is measured twice: every result thrown away, and every result kept alive, as a cache keeps its
objects (then the garbage collector's passes over the growing heap count too; --count events are kept).
Prints Markdown tables and writes them to --out; only ratios on one machine mean much.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from kubetrain.common.kube import jsonwire

ROOT = Path(__file__).resolve().parent.parent


def pod() -> dict[str, Any]:
    """A pod as the API server sends it in a watch event of a running MPI worker."""
    stamp = "2026-11-27T13:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "bench-17-worker-0",
            "namespace": "bench",
            "uid": "0d4c1f9e-8a7b-4c52-9e1d-5b7f3a2c6d10",
            "resourceVersion": "123456",
            "creationTimestamp": stamp,
            "labels": {f"training.kubeflow.org/label-{i}": f"value-{i}" for i in range(6)},
            "annotations": {"sim.kubetrain.dev/outcome": "Succeeded", "sim.kubetrain.dev/run-for": "2s"},
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v2beta1",
                    "kind": "MPIJob",
                    "name": "bench-17",
                    "uid": "6a0e2b44-1f3c-4d8e-b7a9-2c5d8e1f4a33",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": manager,
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": stamp,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields,
                }
                for manager, fields in managed_fields().items()
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "mpi",
                    "image": "bench.kubetrain.dev/trainer:1",
                    "command": ["mpirun", "true"],
                    "env": [{"name": f"ENV_{i}", "value": "x" * 20} for i in range(10)],
                    "ports": [{"containerPort": 22, "protocol": "TCP"}],
                    "volumeMounts": [{"name": "ssh", "mountPath": "/root/.ssh"}],
                }
            ],
            "volumes": [{"name": "ssh", "secret": {"secretName": "bench-17-ssh"}}],
            "restartPolicy": "Never",
            "hostname": "bench-17-worker-0",
            "subdomain": "bench-17",
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": stamp} for t in "ABCD"],
            "containerStatuses": [
                {"name": "mpi", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": stamp}}}
            ],
            "hostIP": "10.0.0.1",
            "podIP": "10.244.0.17",
            "startTime": stamp,
        },
    }


def managed_fields() -> dict[str, dict[str, Any]]:
    """Each manager's fieldsV1, nested as the API server writes them: a set of paths, one dict each."""
    env: dict[str, Any] = {
        f'k:{{"name":"ENV_{i}"}}': {".": {}, "f:name": {}, "f:value": {}} for i in range(10)
    }
    container: dict[str, Any] = {
        ".": {},
        "f:command": {},
        "f:env": {".": {}, **env},
        "f:image": {},
        "f:name": {},
    }
    labels: dict[str, Any] = {f"f:training.kubeflow.org/label-{i}": {} for i in range(6)}
    return {
        "kubetrain": {
            "f:metadata": {
                "f:labels": {".": {}, **labels},
                "f:ownerReferences": {".": {}, 'k:{"uid":"6a0e"}': {}},
            },
            "f:spec": {
                "f:containers": {'k:{"name":"mpi"}': container},
                "f:restartPolicy": {},
                "f:volumes": {},
            },
        },
        "kube-scheduler": {"f:status": {"f:conditions": {".": {}, 'k:{"type":"PodScheduled"}': {".": {}}}}},
        "kwok": {
            "f:status": {
                "f:conditions": {
                    f'k:{{"type":"{t}"}}': {".": {}, "f:status": {}, "f:type": {}} for t in "ABC"
                },
                "f:containerStatuses": {},
                "f:hostIP": {},
                "f:phase": {},
                "f:podIP": {},
                "f:startTime": {},
            }
        },
    }


def codecs() -> dict[str, tuple[Callable[[bytes], object], Callable[[object], bytes]]]:
    decoder, encoder = msgspec.json.Decoder(), msgspec.json.Encoder()
    found: dict[str, tuple[Callable[[bytes], object], Callable[[object], bytes]]] = {
        "json": (json.loads, lambda value: json.dumps(value).encode()),
        "msgspec": (decoder.decode, encoder.encode),
    }
    try:
        orjson = importlib.import_module("orjson")
    except ImportError:
        return found
    found["orjson"] = (orjson.loads, orjson.dumps)
    return found


def best(rounds: int, count: int, work: Callable[[], object]) -> float:
    """Microseconds per item, the best of `rounds` runs of `count` items."""
    times = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(count):
            work()
        times.append(time.process_time() - start)
    return min(times) / count * 1e6


def kept(rounds: int, count: int, work: Callable[[], object]) -> float:
    """As `best`, but every result stays alive until the round ends, as an informer's cache keeps them."""
    times = []
    for _ in range(rounds):
        cache = []
        gc.collect()
        start = time.process_time()
        for _ in range(count):
            cache.append(work())
        times.append(time.process_time() - start)
        del cache
    return min(times) / count * 1e6


def informer_rows(rounds: int, count: int, event: bytes) -> list[str]:
    def whole_then_dropped() -> object:
        decoded = jsonwire.loads(event)
        decoded["object"]["metadata"].pop("managedFields", None)
        return decoded

    def never_built() -> object:
        return jsonwire.loads_watch_event(event, managed_fields=False)

    lines = [
        "| per event, µs | decoded whole, managedFields dropped | managedFields never built | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, measure in (("results thrown away", best), ("results kept (a cache)", kept)):
        before, after = measure(rounds, count, whole_then_dropped), measure(rounds, count, never_built)
        lines.append(f"| {label} | {before:.1f} | {after:.1f} | {after / before:.2f}x |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "json_codecs.md")
    args = parser.parse_args()
    event = json.dumps({"type": "MODIFIED", "object": pod()}).encode()
    body = pod()
    del body["status"], body["metadata"]["managedFields"]
    found = codecs()
    decode = {
        name: best(args.rounds, args.count, functools.partial(fs[0], event)) for name, fs in found.items()
    }
    encode = {
        name: best(args.rounds, args.count, functools.partial(fs[1], body)) for name, fs in found.items()
    }
    names = list(found)
    lines = [
        "| per item, µs (ratio to json) | " + " | ".join(names) + " |",
        "| --- |" + " ---: |" * len(names),
        f"| decode a pod's watch event ({len(event):,} bytes) | "
        + " | ".join(f"{decode[n]:.1f} ({decode[n] / decode['json']:.2f}x)" for n in names)
        + " |",
        f"| encode a pod's create body ({len(json.dumps(body)):,} bytes) | "
        + " | ".join(f"{encode[n]:.1f} ({encode[n] / encode['json']:.2f}x)" for n in names)
        + " |",
    ]
    lines += ["", *informer_rows(args.rounds, args.count, event)]
    table = "\n".join(lines)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
