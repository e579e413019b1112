"""What a reporting job's pods receive: Kubeflow Trainer's env and a projected volume with the token and CA.

Every container of a new pod gets, as Kubeflow Trainer's `trainjobstatus` plugin gives them (so Hugging Face
Transformers' `KubeflowCallback` and the Kubeflow SDK report with no change and no kubetrain import):
- `KUBEFLOW_TRAINER_SERVER_URL`: the operator's endpoint for this job
  (`<base>/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>/status`);
- `KUBEFLOW_TRAINER_SERVER_TOKEN`: the path of a projected ServiceAccount token whose audience is this
  job's own (`token_audience`, as Kubeflow's `statusserver.TokenAudience`): the API server refuses it, and
  the endpoint takes it for this job only, so a token that leaks is good for one job's progress;
- `KUBEFLOW_TRAINER_SERVER_CA_CERT`: the path of the CA bundle that signs the endpoint's certificate, from
  a ConfigMap in the job's namespace (optional: training never waits for progress; until the ConfigMap
  is there and the kubelet has brought it in, reports fail and are dropped).

The volume `kubetrain-progress` is mounted read-only at `MOUNT_PATH`. What a pod's own spec says wins:
- a container that sets `KUBEFLOW_TRAINER_SERVER_URL` itself reports to its own server: it gets none of the
  three variables and no mount (our token must not go to another server);
- a pod that says `automountServiceAccountToken: false` gets no token, and so nothing at all: the endpoint
  needs the token, and without it Transformers' callback and the SDK send nothing anyway;
- a volume named `kubetrain-progress` or a mount at `MOUNT_PATH` the template already has is kept, not added
  twice (a second one would make the API server refuse the pod).
A job opts out with the annotation `kubetrain.io/progress: "false"`. Only pods the operator creates are
rendered this way: running pods, an adopted job's included, are never changed.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kubetrain.common.kube.resources import Obj
from kubetrain.podcontract.progress import CA_CERT_ENV, TOKEN_ENV, URL_ENV, status_path

if TYPE_CHECKING:
    from kubetrain.api import TrainerStatus
    from kubetrain.common.progress.coalesce import JobKey

__all__ = [
    "MOUNT_PATH",
    "OPT_OUT_ANNOTATION",
    "VOLUME",
    "FinalReports",
    "ProgressInjection",
    "opted_out",
    "token_audience",
]

VOLUME = "kubetrain-progress"
MOUNT_PATH = "/var/run/secrets/kubetrain.io/progress"
OPT_OUT_ANNOTATION = "kubetrain.io/progress"


def opted_out(annotations: Mapping[str, str] | None) -> bool:
    """The job says `kubetrain.io/progress: "false"` (or off/no/0)."""
    value = (annotations or {}).get(OPT_OUT_ANNOTATION, "").strip().lower()
    return value in ("false", "off", "no", "0")


def token_audience(prefix: str, *, api_version: str, plural: str, namespace: str, name: str) -> str:
    """The audience of one job's tokens, in the shape of Kubeflow's `statusserver.TokenAudience`
    (`trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status`):
    `<prefix>/kubeflow.org/v1/namespaces/<ns>/pytorchjobs/<name>/status`."""
    return prefix.rstrip("/") + status_path(api_version, namespace, plural, name).removeprefix("/apis")


class FinalReports(Protocol):
    """The reports accepted and not yet written (`Coalescer`), for the reconcile that finishes a job: it
    writes the job's last report together with the verdict, so no reader sees the job finished with an
    older progress."""

    def pending(self, key: JobKey) -> TrainerStatus | None:
        """The job's report waiting to be written, or None."""
        ...

    def written(self, key: JobKey, status: TrainerStatus) -> None:
        """`status` (what `pending` gave) has been written by someone else: it no longer waits."""
        ...


@dataclass(frozen=True)
class ProgressInjection:
    """Where the operator's endpoint is, and how pods prove who they are to it."""

    base_url: str
    """`https://kubetrain-operator.kubetrain-system.svc:8443`."""
    audience: str = "kubetrain-progress"
    """The prefix of each job's token audience (`token_audience`)."""
    ca_config_map: str = "kubetrain-progress-ca"
    """The ConfigMap (key `ca.crt`) in each job's namespace that holds the endpoint's CA bundle."""
    token_seconds: int = 3600
    reports: FinalReports | None = field(default=None, compare=False)
    """Where the reconcile that finishes a job finds its last report (None: written by the endpoint alone)."""
    publish: Callable[[str], Awaitable[None]] | None = field(default=None, compare=False)
    """Publishes the CA ConfigMap to a namespace (once; a failure is logged, not raised): `prepare`."""

    async def prepare(self, namespace: str) -> None:
        """Before a pod that reports is created in `namespace`: its CA ConfigMap is there. The kubelet
        reads an optional ConfigMap once when it starts the pod and refreshes it only about a minute later,
        so a pod made before the copy would fail every report of a short run."""
        if self.publish is not None:
            await self.publish(namespace)

    def apply(self, pod: Obj, *, api_version: str, plural: str, namespace: str, name: str) -> Obj:
        """A copy of `pod` with the volume, its mounts and the env in every container that reports here
        (see the module docstring for the ones that do not)."""
        pod = copy.deepcopy(pod)
        spec = pod.setdefault("spec", {})
        if spec.get("automountServiceAccountToken") is False:
            return pod
        env = {
            URL_ENV: self.base_url.rstrip("/") + status_path(api_version, namespace, plural, name),
            TOKEN_ENV: f"{MOUNT_PATH}/token",
            CA_CERT_ENV: f"{MOUNT_PATH}/ca.crt",
        }
        reporting = [c for c in spec.get("containers") or () if URL_ENV not in _env_names(c)]
        for container in reporting:
            _add(container, env)
        if reporting and not any(v.get("name") == VOLUME for v in spec.get("volumes") or ()):
            audience = token_audience(
                self.audience, api_version=api_version, plural=plural, namespace=namespace, name=name
            )
            spec.setdefault("volumes", []).append(self._volume(audience))
        return pod

    def _volume(self, audience: str) -> Obj:
        token = {"audience": audience, "expirationSeconds": self.token_seconds, "path": "token"}
        # optional: a pod never waits for the ConfigMap (reports fail until the kubelet brings it in)
        ca = {"name": self.ca_config_map, "items": [{"key": "ca.crt", "path": "ca.crt"}], "optional": True}
        return {"name": VOLUME, "projected": {"sources": [{"serviceAccountToken": token}, {"configMap": ca}]}}


def _env_names(container: Mapping[str, Any]) -> set[str]:
    return {str(item.get("name")) for item in container.get("env") or ()}


def _add(container: dict[str, Any], env: Mapping[str, str]) -> None:
    own = _env_names(container)
    container.setdefault("env", []).extend({"name": k, "value": v} for k, v in env.items() if k not in own)
    mounts = container.setdefault("volumeMounts", [])
    if not any(m.get("name") == VOLUME or m.get("mountPath") == MOUNT_PATH for m in mounts):
        mounts.append({"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True})
