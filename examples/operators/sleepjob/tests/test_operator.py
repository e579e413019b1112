"""The SleepJob operator against kubetrain's test control plane: a real etcd and kube-apiserver, kwok nodes.

The operator runs as in a cluster (`python -m sleepjob`), on the CRD from config/. kwok plays the
kubelet: the sample job's pods carry `sim.kubetrain.dev/run-for: 1s`, so each runs for a second and then
succeeds (`sim.kubetrain.dev/outcome: Failed` would fail it); a pod with neither runs until deleted. The
plane's binaries are those a kubetrain checkout builds with `bash hack/testbin.sh`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.testing import ControlPlane
from sleepjob.__main__ import main
from sleepjob.kind import SLEEPJOB

ROOT = Path(__file__).resolve().parents[1]
CRD = ROOT / "config" / "crd" / "sleepjobs.example.dev.yaml"
SAMPLE = ROOT / "examples" / "sleepjob.yaml"


def test_the_crd_in_config_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds"]) == 0
    regenerate = "run `python -m sleepjob crds > config/crd/sleepjobs.example.dev.yaml`"
    assert capsys.readouterr().out == CRD.read_text(), regenerate


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with ControlPlane() as plane:
        plane.kubectl("apply", "--server-side", "-f", str(CRD))
        plane.wait_established(SLEEPJOB.crd_name)
        yield plane


def test_a_sleepjob_runs_to_succeeded(plane: ControlPlane) -> None:
    namespace = plane.create_namespace()
    argv = ["--kubeconfig", str(plane.kubeconfig), "--health-probe-bind-address=0"]
    operator = subprocess.Popen([sys.executable, "-m", "sleepjob", *argv], cwd=ROOT)
    try:
        plane.kubectl("apply", "-f", str(SAMPLE), namespace=namespace)
        finished = _wait_until_finished(plane, namespace)
    finally:
        operator.terminate()
        code = operator.wait(timeout=60)
    assert finished["type"] == "Succeeded", f"the job finished {finished['type']}: {finished.get('message')}"
    pod = json.loads(plane.kubectl("get", "pod/sleepjob-sample-sleeper-1", "-ojson", namespace=namespace).stdout)
    env = {var["name"]: var["value"] for var in pod["spec"]["containers"][0]["env"]}
    assert (env["SLEEPER_INDEX"], env["SLEEPERS"]) == ("1", "2"), "configure_pod's env"
    assert pod["metadata"]["labels"]["example.dev/job-name"] == "sleepjob-sample", "labels under the group"
    assert code == 0, "the operator stops cleanly on SIGTERM"


def test_too_many_sleepers_are_refused_at_apply(plane: ControlPlane) -> None:
    """The kind's own CEL rule (KindInfo.validations), checked by the API server: no operator runs here."""
    namespace = plane.create_namespace()
    as_json = plane.kubectl("create", "--dry-run=client", "-ojson", "-f", str(SAMPLE), namespace=namespace)
    job = json.loads(as_json.stdout)
    job["spec"]["sleepReplicaSpecs"]["Sleeper"]["replicas"] = 9
    refused = plane.kubectl("apply", "-f", "-", input=json.dumps(job), namespace=namespace, check=False)
    assert refused.returncode != 0, "the API server accepted 9 sleepers"
    assert "spec.sleepReplicaSpecs: Invalid value" in refused.stderr, refused.stderr
    assert "a SleepJob sleeps on at most 8 pods; lower replicas" in refused.stderr, refused.stderr
    job["spec"]["sleepReplicaSpecs"]["Sleeper"]["replicas"] = 8
    plane.kubectl("apply", "-f", "-", input=json.dumps(job), namespace=namespace)


def _wait_until_finished(plane: ControlPlane, namespace: str, timeout: float = 90) -> dict[str, Any]:
    """The job's first terminal condition (Succeeded or Failed) once it is True, printed; polled, as
    `kubectl wait` would. A job that fails is reported at once, not after `timeout`."""
    deadline, conditions = time.monotonic() + timeout, list[Any]()
    while time.monotonic() < deadline:
        shown = plane.kubectl("get", "sleepjobs.example.dev/sleepjob-sample", "-ojson", namespace=namespace)
        conditions = list(json.loads(shown.stdout).get("status", {}).get("conditions", []))
        for condition in conditions:
            if condition["type"] in ("Succeeded", "Failed") and condition["status"] == "True":
                reason, message = condition.get("reason"), condition.get("message")
                print(f"sleepjob-sample: {condition['type']} ({reason}): {message}")
                return dict(condition)
        time.sleep(0.5)
    raise AssertionError(f"neither Succeeded nor Failed within {timeout} s; conditions: {conditions}")
