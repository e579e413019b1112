"""Which kinds kubetrain's Kueue integration manages, decided once at start-up (`--kueue-integration`).

For each kind a cluster has exactly one integration with Kueue: Kueue's built-in one (its configuration
lists the kind in `integrations.frameworks`: its webhook suspends the job, its controller makes the
Workload and unsuspends the job on admission, and kubetrain honours `suspend` as always), or kubetrain's
(the kind is in Kueue's `integrations.externalFrameworks`, and kubetrain makes and drives the Workload).
Kueue refuses a configuration that lists a kind in both.

- `auto` (the default): every kind that Kueue's configuration does not list in `integrations.frameworks`
  is kubetrain's. The configuration is read once from Kueue's ConfigMap (`--kueue-config`, default
  `kueue-system/kueue-manager-config`, key `controller_manager_config.yaml`); where it cannot be read (no
  such ConfigMap, no permission to read it), Kueue v0.19's default configuration is assumed: MPIJob is
  Kueue's, every other kind kubetrain's. The log says which, once.
- `none`: kubetrain manages no kind (each job is left to whatever Kueue does with it).
- a comma list of kinds (`PyTorchJob,TFJob`): exactly those.

Without the Workload API on the cluster (Kueue not installed) the integration is off, logged once, and a
job labelled with a queue runs as it always did: there is no quota to wait for.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, final

import yaml

from kubetrain.api import KindInfo
from kubetrain.common.errors import ApiError, Forbidden, NotFound
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import CONFIGMAPS
from kubetrain.common.kueue.names import RESOURCE_FLAVORS

__all__ = [
    "AUTO",
    "DEFAULT_KUEUE_CONFIG",
    "KUEUE_V019_FRAMEWORKS",
    "NONE",
    "KueueIntegration",
    "builtin_frameworks",
    "check_config_name",
    "framework_name",
    "parse_setting",
    "resolve",
]

log = logging.getLogger("kubetrain.kueue")

AUTO, NONE = "auto", "none"
DEFAULT_KUEUE_CONFIG = "kueue-system/kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
KUEUE_V019_FRAMEWORKS = frozenset({"batch/job", "kubeflow.org/mpijob", "jobset.x-k8s.io/jobset", "pod"})
"""The part of Kueue v0.19's default `integrations.frameworks` that can name a kind of ours: of the Kubeflow
kinds, only MPIJob (`config/components/manager/controller_manager_config.yaml`)."""


@final
@dataclass(frozen=True, slots=True)
class KueueIntegration:
    """The kinds (by `KindInfo.kind`) whose queued jobs kubetrain's integration admits through Kueue."""

    kinds: frozenset[str]
    adopt: bool = False
    """Whether a job's Workload that Kueue's own integration made is taken over (a cluster that moved the
    kind from Kueue's integration to kubetrain's): only when the kinds came from Kueue's configuration, which
    then says that Kueue's integration no longer drives them. Otherwise such a Workload means Kueue's
    integration is on for the kind, and the job is left to it."""
    pods_ready: bool = True
    """Whether Kueue waits for pods to be ready (`waitForPodsReady`; always, in Kueue v0.19's configuration
    API): then each admitted job's Workload is told `PodsReady`, or Kueue evicts it after the timeout.
    Unknown (configuration unreadable): True."""

    def manages(self, kind: KindInfo) -> bool:
        return kind.kind in self.kinds


def framework_name(kind: KindInfo) -> str:
    """How Kueue's `integrations.frameworks` names the built-in integration of a kind: `group/kind`."""
    return f"{kind.group}/{kind.kind.lower()}"


def parse_setting(text: str, kinds: Iterable[str]) -> str | frozenset[str]:
    """`auto`, `none`, or the set of kinds (of `kinds`, e.g. `PyTorchJob`) a comma list names, in any
    letter case; a ValueError names the flag, the unknown kind and the choices."""
    value = text.strip()
    if value.lower() in (AUTO, NONE):
        return value.lower()
    known = {k.lower(): k for k in kinds}
    chosen = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [part for part in chosen if part.lower() not in known]
    if unknown or not chosen:
        choices = ", ".join(sorted(known.values()))
        raise ValueError(
            f"--kueue-integration={text!r}: {', '.join(unknown) or 'no kind'} is not a kind of this "
            f"operator; write auto, none, or a comma list of: {choices}"
        )
    return frozenset(known[part.lower()] for part in chosen)


def check_config_name(text: str) -> None:
    """A ValueError naming `--kueue-config` unless `text` is NAMESPACE/NAME."""
    namespace, slash, name = text.partition("/")
    if not (namespace and slash and name) or "/" in name:
        raise ValueError(f"--kueue-config={text!r}: write NAMESPACE/NAME, e.g. {DEFAULT_KUEUE_CONFIG}")


def builtin_frameworks(config: Mapping[str, Any]) -> frozenset[str]:
    """`integrations.frameworks` of a parsed Kueue configuration (Kueue's own default when absent)."""
    integrations = config.get("integrations")
    if not isinstance(integrations, dict) or "frameworks" not in integrations:
        return frozenset({"batch/job"})
    return frozenset(str(f) for f in integrations.get("frameworks") or ())


def waits_for_pods_ready(config: Mapping[str, Any]) -> bool:
    """Whether a parsed Kueue configuration has Kueue wait for pods to be ready. In the `v1beta2`
    configuration API (Kueue v0.19's) it always does: the section is defaulted when absent (a 30 minute
    timeout) and has no switch; in `v1beta1` only with `waitForPodsReady.enable: true`."""
    if str(config.get("apiVersion", "")).endswith("/v1beta1"):
        wait = config.get("waitForPodsReady")
        return isinstance(wait, dict) and wait.get("enable") is True
    return True


async def resolve(
    api: ApiClient,
    setting: str | frozenset[str],
    kinds: Iterable[KindInfo],
    *,
    config: str = DEFAULT_KUEUE_CONFIG,
) -> KueueIntegration | None:
    """The integration to run with (None: off), from the parsed `setting`; logs its choice once."""
    kinds = list(kinds)
    if setting == NONE:
        log.info("Kueue integration: off (--kueue-integration=none)")
        return None
    if not await _workload_api(api):
        return None
    read = await _config(api, config)
    if isinstance(setting, frozenset):
        chosen = setting
    else:
        frameworks = KUEUE_V019_FRAMEWORKS if read is None else builtin_frameworks(read)
        chosen = frozenset(k.kind for k in kinds if framework_name(k) not in frameworks)
    named = ", ".join(sorted(chosen)) or "none"
    left = ", ".join(sorted(k.kind for k in kinds if k.kind not in chosen)) or "none"
    log.info(
        "Kueue integration: kubetrain admits queued jobs of %s; left to Kueue's own integration: %s",
        named,
        left,
    )
    adopt = read is not None and not isinstance(setting, frozenset)
    return KueueIntegration(chosen, adopt=adopt, pods_ready=read is None or waits_for_pods_ready(read))


async def _workload_api(api: ApiClient) -> bool:
    try:
        await api.list(RESOURCE_FLAVORS, managed_fields=False)
    except NotFound:
        log.info(
            "Kueue integration: off (the kueue.x-k8s.io/v1beta2 API is not served: Kueue is not installed)"
        )
        return False
    except Forbidden:
        log.warning(
            "Kueue integration: off (this operator may not list Kueue's ResourceFlavors; a single-namespace "
            "install needs manifests/kueue/namespaced-reader applied by a cluster admin)"
        )
        return False
    except ApiError as err:
        log.warning("Kueue integration: off (cannot read Kueue's ResourceFlavors: %s)", err)
        return False
    return True


async def _config(api: ApiClient, config: str) -> Mapping[str, Any] | None:
    """Kueue's configuration, parsed; None (logged) when it cannot be read."""
    namespace, _, name = config.partition("/")
    try:
        configmap = await api.get(CONFIGMAPS, namespace, name)
        parsed = yaml.safe_load((configmap.get("data") or {})[CONFIG_KEY]) or {}
        if not isinstance(parsed, dict):
            raise ValueError("not a mapping")
        return parsed
    except (ApiError, KeyError, ValueError, yaml.YAMLError) as err:
        # A refusal is named, not quoted: the server's text would read as a denial the RBAC must not have.
        why = "not allowed to read it" if isinstance(err, Forbidden) else (str(err) or type(err).__name__)
        log.info(
            "Kueue integration: cannot read Kueue's configuration from ConfigMap %s, key %s (%s); assuming "
            "Kueue v0.19's default configuration (MPIJob is Kueue's own, the other kinds kubetrain's)",
            config, CONFIG_KEY, why,
        )  # fmt: skip
        return None
