"""Fake nodes and a simulated pod lifecycle for the test control plane, played by kwok.

kwok stands in for the kubelet: it marks our fake nodes Ready, turns pods scheduled onto them into
Running pods, finishes them when a test asks, and completes graceful deletion. It only does what the
Stages below say, and it picks at random among matching Stages, so every pod Stage's selector excludes
the others (by phase, by deletionTimestamp, and by whether `run-for` is set).

Test-only names, all under `sim.kubetrain.dev/` so that they never leak into production defaults:

Node label
  `sim.kubetrain.dev/fake-node: "true"`   kwok manages exactly the nodes that carry it.
Pod annotations (set by the test, or in the pod template of the object under test)
  `sim.kubetrain.dev/outcome`     `Succeeded` or `Failed` (exact spelling). On a Running pod without
                                  `run-for`, the pod finishes at once.
  `sim.kubetrain.dev/run-for`     a Go duration ("3s", "1m") or an RFC 3339 time: the pod finishes that
                                  long after its last change (in practice, after it became Running), with
                                  `outcome` (default Succeeded).
  `sim.kubetrain.dev/exit-code`   exit code of every container of a Failed pod (default 1; a Succeeded
                                  pod always exits 0).
  `sim.kubetrain.dev/reason`      terminated reason of the containers (default `Completed` or `Error`;
                                  e.g. `OOMKilled`).
Pods carrying none of these stay Running until deleted, like a long training job. Force terminal phases
only on pods with `restartPolicy: Never` (what a real kubelet would report for them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

__all__ = [
    "ANNOTATION_EXIT_CODE",
    "ANNOTATION_OUTCOME",
    "ANNOTATION_REASON",
    "ANNOTATION_RUN_FOR",
    "DEFAULT_NODES",
    "FAKE_NODE_LABEL",
    "GPU_RESOURCE",
    "FakeNode",
    "Outcome",
    "kwok_config",
    "outcome_annotations",
]

SIM_DOMAIN = "sim.kubetrain.dev"
FAKE_NODE_LABEL = f"{SIM_DOMAIN}/fake-node"
ANNOTATION_OUTCOME = f"{SIM_DOMAIN}/outcome"
ANNOTATION_RUN_FOR = f"{SIM_DOMAIN}/run-for"
ANNOTATION_EXIT_CODE = f"{SIM_DOMAIN}/exit-code"
ANNOTATION_REASON = f"{SIM_DOMAIN}/reason"
GPU_RESOURCE = "nvidia.com/gpu"


class Outcome(StrEnum):
    """How a simulated pod ends."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


def outcome_annotations(
    outcome: Outcome, *, exit_code: int | None = None, reason: str | None = None, run_for: str | None = None
) -> dict[str, str]:
    """The pod annotations that make kwok finish a pod: at once, or `run_for` after it started."""
    if outcome is Outcome.SUCCEEDED and exit_code not in (None, 0):
        raise ValueError(
            f"exit_code={exit_code}: a Succeeded pod exits 0; use Outcome.FAILED for a non-zero code"
        )
    if exit_code is not None and not 0 <= exit_code <= 255:
        raise ValueError(f"exit_code={exit_code}: must be within 0..255")
    annotations = {ANNOTATION_OUTCOME: outcome.value}
    if exit_code is not None:
        annotations[ANNOTATION_EXIT_CODE] = str(exit_code)
    if reason:
        annotations[ANNOTATION_REASON] = reason
    if run_for:
        annotations[ANNOTATION_RUN_FOR] = run_for
    return annotations


@dataclass(frozen=True)
class FakeNode:
    """A Node object that kwok will manage, with its capacity given up front (Node create keeps status)."""

    name: str
    cpu: str = "32"
    memory: str = "256Gi"
    gpus: int = 8
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        capacity = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.pods)}
        if self.gpus:
            capacity[GPU_RESOURCE] = str(self.gpus)
        labels = {
            FAKE_NODE_LABEL: "true",
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **self.labels,
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels},
            "status": {"capacity": capacity, "allocatable": dict(capacity)},
        }


DEFAULT_NODES = (FakeNode("kwok-node-0"), FakeNode("kwok-node-1"))

_NOT_DELETING = "- {key: '.metadata.deletionTimestamp', operator: DoesNotExist}"
_RUNNING = "- {key: '.status.phase', operator: In, values: [Running]}"

# The finishing status, shared by the two finish Stages. SMP merges containerStatuses by name, so the
# running state is removed explicitly (`running: null`).
_FINISH_TEMPLATE = """\
      {{ $now := Now }}
      {{ $ann := or .metadata.annotations dict }}
      {{ $failed := eq (or (index $ann "sim.kubetrain.dev/outcome") "Succeeded") "Failed" }}
      {{ $code := 0 }}{{ if $failed }}{{ $code = or (index $ann "sim.kubetrain.dev/exit-code") 1 }}{{ end }}
      {{ $reason := or (index $ann "sim.kubetrain.dev/reason") (ternary "Error" "Completed" $failed) }}
      phase: {{ ternary "Failed" "Succeeded" $failed }}
      conditions:
      - {type: Ready, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: false
        started: false
        restartCount: 0
        state:
          running: null
          terminated:
            exitCode: {{ $code }}
            reason: {{ $reason | Quote }}
            startedAt: {{ $now | Quote }}
            finishedAt: {{ $now | Quote }}
      {{ end }}
"""

_KWOK_CONFIG = f"""\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
# Written out in full: kwok v0.8.0 does not default the options of a --config file (zero parallelism fails).
# The kubelet API (container logs) is served on a loopback port, which every node advertises with the
# address 127.0.0.1; `Logs` (which file backs which pod) are read from the API server (kwok_logs.py).
options:
  manageNodesWithLabelSelector: {FAKE_NODE_LABEL}=true
  cidr: 10.244.0.0/16
  nodeIP: 127.0.0.1
  nodePort: @PORT@
  serverAddress: 127.0.0.1:@PORT@
  tlsCertFile: @CERT@
  tlsPrivateKeyFile: @KEY@
  enableCRDs: [Logs]
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 2
  nodeLeaseParallelism: 1
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
  enableDebuggingHandlers: true
  enableProfilingHandler: false
  enableContentionProfiling: false
---
# A fake node becomes Ready once (no node-lifecycle controller runs, so no heartbeats are needed).
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: sim-node-ready}}
spec:
  resourceRef: {{apiGroup: v1, kind: Node}}
  selector:
    matchExpressions:
    - {{key: '.status.conditions.[] | select(.type == "Ready") | .status', operator: NotIn, values: ["True"]}}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      {{{{ range $c := list (list "Ready" "True" "KubeletReady")
           (list "MemoryPressure" "False" "SimOK") (list "DiskPressure" "False" "SimOK")
           (list "PIDPressure" "False" "SimOK") (list "NetworkUnavailable" "False" "SimOK") }}}}
      - type: {{{{ index $c 0 | Quote }}}}
        status: {{{{ index $c 1 | Quote }}}}
        reason: {{{{ index $c 2 | Quote }}}}
        message: "simulated by kwok"
        lastHeartbeatTime: {{{{ $now | Quote }}}}
        lastTransitionTime: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      addresses:
      - {{type: InternalIP, address: {{{{ NodeIP | Quote }}}}}}
      - {{type: Hostname, address: {{{{ .metadata.name | Quote }}}}}}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        osImage: kwok fake node
        kernelVersion: kwok
        containerRuntimeVersion: kwok
        kubeletVersion: kwok
      daemonEndpoints:
        kubeletEndpoint: {{Port: {{{{ NodePort }}}}}}
      {{{{ if not .status.capacity }}}}
      capacity: {{cpu: "32", memory: 256Gi, pods: "110"}}
      allocatable: {{cpu: "32", memory: 256Gi, pods: "110"}}
      {{{{ end }}}}
---
# A pod scheduled onto a fake node starts: init containers done, containers running, Ready.
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: sim-pod-start}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    {_NOT_DELETING}
    - {{key: '.status.phase', operator: In, values: [Pending]}}
    - {{key: '.spec.nodeName', operator: Exists}}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}
      hostIP: {{{{ NodeIPWith .spec.nodeName | Quote }}}}
      podIP: {{{{ PodIPWith .spec.nodeName (or .spec.hostNetwork false)
                 (or .metadata.uid "") (or .metadata.name "") (or .metadata.namespace "") | Quote }}}}
      conditions:
      {{{{ range $t := list "PodReadyToStartContainers" "Initialized" "ContainersReady" "Ready" }}}}
      - {{type: {{{{ $t }}}}, status: "True", lastTransitionTime: {{{{ $now | Quote }}}}}}
      {{{{ end }}}}
      initContainerStatuses:
      {{{{ range .spec.initContainers }}}}
      - name: {{{{ .name | Quote }}}}
        image: {{{{ .image | Quote }}}}
        ready: true
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{{{ $now | Quote }}}}
            finishedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - name: {{{{ .name | Quote }}}}
        image: {{{{ .image | Quote }}}}
        ready: true
        started: true
        restartCount: 0
        state: {{running: {{startedAt: {{{{ $now | Quote }}}}}}}}
      {{{{ end }}}}
---
# The test asked for an outcome and no delay: finish now.
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: sim-pod-finish-now}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    {_NOT_DELETING}
    {_RUNNING}
    - {{key: '.metadata.annotations["{ANNOTATION_OUTCOME}"]', operator: In, values: [Succeeded, Failed]}}
    - {{key: '.metadata.annotations["{ANNOTATION_RUN_FOR}"]', operator: DoesNotExist}}
  next:
    statusTemplate: |
{_FINISH_TEMPLATE}---
# The pod runs for a while, then finishes with its outcome (default Succeeded).
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: sim-pod-finish-after}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    {_NOT_DELETING}
    {_RUNNING}
    - {{key: '.metadata.annotations["{ANNOTATION_RUN_FOR}"]', operator: Exists}}
  delay:
    durationMilliseconds: 0
    durationFrom:
      jq: {{expression: '.metadata.annotations["{ANNOTATION_RUN_FOR}"]'}}
  next:
    statusTemplate: |
{_FINISH_TEMPLATE}---
# Graceful deletion: play the kubelet, confirm the deletion so the pod object goes away. Only while a
# grace period runs: kwok deletes by name, with no UID precondition (a kubelet sends one), so a delete of a
# pod that the API server is removing itself (grace period 0: a finished or unscheduled pod, a forced
# delete, or kwok's own delete) can land after the pod is gone and remove its same-named replacement.
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: sim-pod-delete}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    - {{key: '.metadata.deletionTimestamp', operator: Exists}}
    - {{key: '.metadata.deletionGracePeriodSeconds > 0', operator: In, values: ["true"]}}
  next:
    delete: true
"""


def kwok_config(*, kubelet_port: int, tls_cert: Path, tls_key: Path) -> str:
    """kwok's --config: its options (kubelet API on `kubelet_port`, TLS with this key pair) and Stages."""
    return (
        _KWOK_CONFIG.replace("@PORT@", str(kubelet_port))
        .replace("@CERT@", str(tls_cert))
        .replace("@KEY@", str(tls_key))
    )
