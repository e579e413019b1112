"""The `node` tier's plane: a NodePlane (kubetrain.testing.node_plane) with one real node, started once per
session. Its parts come from `bash hack/node.sh` and the images from `bash hack/images.sh`; when they are
missing the fixture FAILS and names the command: a required test never skips for a missing dependency."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.testing.binaries import MissingBinariesError, find_binaries
from kubetrain.testing.node_binaries import find_node_binaries
from kubetrain.testing.node_plane import NodePlane
from kubetrain.testing.volumes import claims_in

from .examples import static_volume

BASE = Path(__file__).resolve().parents[2] / "manifests" / "base"
NAMESPACE = "kubetrain-system"
OPERATOR = "kubetrain-operator"
VERSION = "0.1.0"
OPERATOR_IMAGE = f"docker.io/kubetrain/kubetrain-operator:{VERSION}"
NODE_IMAGES = (OPERATOR_IMAGE,)
"""Imported into the node's containerd at start (once per build: its root is kept); each test module
imports the trainer images it needs (`trainer_images`)."""
TRAINER = "docker.io/kubetrain/trainer-{}:" + VERSION
SHARED_LAYERS = {"pytorch": ("pytorch", "horovod"), "horovod": ("pytorch", "horovod")}
"""Images imported together: they share the torch layers, which one `podman save` then sends once."""


@pytest.fixture(scope="session")
def node_plane() -> Iterator[NodePlane]:
    if os.geteuid() != 0:
        pytest.fail("the node tier runs a kubelet and containerd: run it as root", pytrace=False)
    try:
        plane = NodePlane(images=NODE_IMAGES, binaries=find_binaries(), node_binaries=find_node_binaries())
    except MissingBinariesError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        plane.start()
    except (RuntimeError, TimeoutError, OSError) as err:
        plane.stop()
        pytest.fail(f"the real node did not start: {err}", pytrace=False)
    yield plane
    plane.stop()


def kubectl_json(plane: NodePlane, *args: str) -> Any:
    """`kubectl ... -o json` in the operator's namespace."""
    return json.loads(plane.kubectl(*args, "-o", "json", namespace=NAMESPACE).stdout)


@pytest.fixture(scope="session")
def operator_installed(node_plane: NodePlane) -> dict[str, Any]:
    """README's install, `kubectl apply -k manifests/base`; the operator's pod once it rolled out."""
    node_plane.kubectl("apply", "-k", str(BASE))
    node_plane.kubectl(
        "rollout", "status", f"deployment/{OPERATOR}", "--timeout=300s", namespace=NAMESPACE, timeout=320
    )
    pods = kubectl_json(node_plane, "get", "pods", "-l", "app.kubernetes.io/component=operator")["items"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return dict(pods[0])


@pytest.fixture(scope="session")
def trainer_images(node_plane: NodePlane) -> Callable[..., None]:
    """`trainer_images("pytorch", ...)` imports those trainer images into the node (once per build)."""

    def ensure(*frameworks: str) -> None:
        began = time.monotonic()
        wanted = {c for f in frameworks for c in SHARED_LAYERS.get(f, (f,))}
        imported = node_plane.node.import_images([TRAINER.format(f) for f in sorted(wanted)])
        if imported:
            print(f"imported {', '.join(imported)} into the node in {time.monotonic() - began:.0f} s")

    return ensure


@pytest.fixture
def namespace_on_node(node_plane: NodePlane, operator_installed: dict[str, Any]) -> Iterator[str]:
    """A fresh namespace for one test's jobs, deleted afterwards (its pods' containers stop with it)."""
    name = node_plane.create_namespace("node-")
    yield name
    node_plane.delete_namespace(name)


@pytest.fixture
def volumes_for_claims(node_plane: NodePlane, tmp_path: Path) -> Iterator[Callable[[str, list[Any]], None]]:
    """`provide(namespace, objects)`: a static volume for every PersistentVolumeClaim among `objects`, each
    on a directory of its own under tmp_path; the volumes are deleted after the test."""
    made: list[str] = []

    def provide(namespace: str, objects: list[Any]) -> None:
        for claim in claims_in(objects):
            directory = tmp_path / namespace / claim["metadata"]["name"]
            directory.mkdir(parents=True)
            made.append(static_volume(node_plane, namespace, claim, directory))

    yield provide
    for name in made:
        node_plane.kubectl("delete", "persistentvolume", name, "--wait=false", check=False)
