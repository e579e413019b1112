"""What a reporting job's pods receive: the KEP-2779 env and a projected volume with the token and the CA.

Every container of a new pod gets, unless it sets them itself:
- `KUBEFLOW_TRAINER_STATUS_URL`: the operator's endpoint for this job
  (`<base>/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>/status`);
- `KUBEFLOW_TRAINER_STATUS_TOKEN`: the path of a projected ServiceAccount token with the operator's
  audience (the kubelet rotates it; it is good for nothing but this endpoint, since the API server
  refuses a token whose audience is not its own);
- `KUBEFLOW_TRAINER_STATUS_CA_CERT`: the path of the CA bundle that signs the endpoint's certificate, from
  a ConfigMap in the job's namespace (optional: training never waits for progress; until the ConfigMap
  is there and the kubelet has brought it in, reports fail and are dropped).

The volume `kubetrain-progress` is mounted read-only at `MOUNT_PATH`. A job opts out with the annotation
`kubetrain.io/progress: "false"`. Only pods the operator creates are rendered this way: running pods, an
adopted job's included, are never changed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubetrain.common.kube.resources import Obj
from kubetrain.podcontract.progress import CA_CERT_ENV, TOKEN_ENV, URL_ENV, status_path

__all__ = ["MOUNT_PATH", "OPT_OUT_ANNOTATION", "VOLUME", "ProgressInjection", "opted_out"]

VOLUME = "kubetrain-progress"
MOUNT_PATH = "/var/run/secrets/kubetrain.io/progress"
OPT_OUT_ANNOTATION = "kubetrain.io/progress"


def opted_out(annotations: Mapping[str, str] | None) -> bool:
    """The job says `kubetrain.io/progress: "false"` (or off/no/0)."""
    value = (annotations or {}).get(OPT_OUT_ANNOTATION, "").strip().lower()
    return value in ("false", "off", "no", "0")


@dataclass(frozen=True)
class ProgressInjection:
    """Where the operator's endpoint is, and how pods prove who they are to it."""

    base_url: str
    """`https://kubetrain-progress.kubetrain-system.svc:8443`."""
    audience: str = "kubetrain-progress"
    ca_config_map: str = "kubetrain-progress-ca"
    """The ConfigMap (key `ca.crt`) in each job's namespace that holds the endpoint's CA bundle."""
    token_seconds: int = 3600

    def apply(self, pod: Obj, *, api_version: str, plural: str, namespace: str, name: str) -> Obj:
        """A copy of `pod` with the volume, its mounts and the env in every container."""
        pod = copy.deepcopy(pod)
        spec = pod.setdefault("spec", {})
        spec.setdefault("volumes", []).append(self._volume())
        env = {
            URL_ENV: self.base_url.rstrip("/") + status_path(api_version, namespace, plural, name),
            TOKEN_ENV: f"{MOUNT_PATH}/token",
            CA_CERT_ENV: f"{MOUNT_PATH}/ca.crt",
        }
        for container in spec.get("containers") or ():
            _add(container, env)
        return pod

    def _volume(self) -> Obj:
        token = {"audience": self.audience, "expirationSeconds": self.token_seconds, "path": "token"}
        # optional: a pod never waits for the ConfigMap (reports fail until the kubelet brings it in)
        ca = {"name": self.ca_config_map, "items": [{"key": "ca.crt", "path": "ca.crt"}], "optional": True}
        return {"name": VOLUME, "projected": {"sources": [{"serviceAccountToken": token}, {"configMap": ca}]}}


def _add(container: dict[str, Any], env: Mapping[str, str]) -> None:
    own = {item.get("name") for item in container.get("env") or ()}
    container.setdefault("env", []).extend({"name": k, "value": v} for k, v in env.items() if k not in own)
    mount = {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
    container.setdefault("volumeMounts", []).append(mount)
