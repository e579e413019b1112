"""The pods of a job and their logs, found by the `training.kubeflow.org/*` labels the operator sets.

Pods are returned in replica order (the kind's replica types in their canonical order, then the index),
so that logs and listings read Master/Chief first and Worker 0, 1, 2 ... after, whatever the server's
order. The label names are the Kubeflow wire contract that kubectl users select on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from kubernetes.client import CoreV1Api, V1Pod
from kubernetes.client.exceptions import ApiException
from kubernetes.watch import Watch

from kubetrain.api import KindInfo
from kubetrain.client.errors import InvalidArgumentError, LogsUnavailableError
from kubetrain.client.jobs import replica_label
from kubetrain.client.kube import status_of
from kubetrain.client.logs import LogLine, PodStream, merge_streams

__all__ = [
    "JOB_NAME_LABEL",
    "OPERATOR_NAME_LABEL",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "follow_logs",
    "job_selector",
    "pick_container",
    "pod_started",
    "read_logs",
    "sort_pods",
]

_PREFIX = "training.kubeflow.org/"
OPERATOR_NAME_LABEL = _PREFIX + "operator-name"
JOB_NAME_LABEL = _PREFIX + "job-name"
REPLICA_TYPE_LABEL = _PREFIX + "replica-type"
REPLICA_INDEX_LABEL = _PREFIX + "replica-index"


def job_selector(info: KindInfo, name: str, replica_type: str | None, replica_index: int | None) -> str:
    """The label selector of a job's pods, optionally of one replica type and index."""
    prefix = info.label_prefix  # Kubeflow's for the built-in kinds (the constants above)
    labels = {prefix + "operator-name": info.operator_name, prefix + "job-name": name}
    if replica_type is not None:
        canonical = info.canonical_replica_type(replica_type)
        if canonical is None:
            types = ", ".join(info.replica_types)
            raise InvalidArgumentError(
                f"{info.kind} has no replica type {replica_type!r}; its types: {types}"
            )
        labels[prefix + "replica-type"] = canonical.lower()
    if replica_index is not None:
        if replica_index < 0:
            raise InvalidArgumentError(f"replica index {replica_index} is negative; indexes start at 0")
        labels[prefix + "replica-index"] = str(replica_index)
    return ",".join(f"{key}={value}" for key, value in labels.items())


def sort_pods(info: KindInfo, pods: Iterable[V1Pod]) -> list[V1Pod]:
    """Pods in replica order: replica type (canonical order), then index, then name."""
    order = {rtype.lower(): position for position, rtype in enumerate(info.replica_types)}

    def key(pod: V1Pod) -> tuple[int, int, str]:
        labels = (pod.metadata.labels if pod.metadata else None) or {}
        index = labels.get(info.label_prefix + "replica-index", "")
        rank = order.get(labels.get(info.label_prefix + "replica-type", ""), len(order))
        return rank, int(index) if index.isdigit() else -1, _name(pod)

    return sorted(pods, key=key)


def pod_started(pod: V1Pod) -> bool:
    """Whether the pod's containers run or ran (a Pending pod has no log yet)."""
    phase = pod.status.phase if pod.status else None
    return phase in ("Running", "Succeeded", "Failed")


def pick_container(info: KindInfo, pod: V1Pod, container: str | None) -> str:
    """The container to read: the one asked for, else the kind's default container, else the first."""
    names = [c.name for c in (pod.spec.containers if pod.spec else [])]
    if container is not None:
        if container not in names:
            raise InvalidArgumentError(
                f"pod {_name(pod)} has no container {container!r}; its containers: {', '.join(names)}"
            )
        return container
    if info.default_container_name in names:
        return str(info.default_container_name)
    if not names:
        raise LogsUnavailableError(f"pod {_name(pod)} has no container")
    return names[0]


def read_logs(
    core: CoreV1Api, info: KindInfo, job: str, pods: list[V1Pod], container: str | None
) -> dict[str, str]:
    """The current logs of every started pod, by pod name; pods not started yet are left out."""
    started = [pod for pod in pods if pod_started(pod)]
    if not started:
        raise LogsUnavailableError(_nothing_started(job, pods))
    logs: dict[str, str] = {}
    for pod in started:
        name, namespace = _name(pod), _namespace(pod)
        try:
            text = core.read_namespaced_pod_log(
                name, namespace, container=pick_container(info, pod, container)
            )
        except ApiException as error:
            raise LogsUnavailableError(f"cannot read the logs of pod {name}: {_message(error)}") from None
        logs[name] = str(text)
    return logs


def follow_logs(
    core: CoreV1Api, info: KindInfo, job: str, pods: list[V1Pod], container: str | None, *, poll: float = 2.0
) -> Iterator[LogLine]:
    """The merged, followed logs of `pods` (each waited for until it starts), tagged with their replica."""
    if not pods:
        raise LogsUnavailableError(_nothing_started(job, pods))
    streams = [_stream(core, info, job, pod, container) for pod in pods]
    return merge_streams(streams, poll_interval=poll, describe=_describe)


def _stream(core: CoreV1Api, info: KindInfo, job: str, pod: V1Pod, container: str | None) -> PodStream:
    name, namespace = _name(pod), _namespace(pod)
    chosen = pick_container(info, pod, container)
    watch = Watch()  # type: ignore[no-untyped-call]

    def started() -> bool:
        return pod_started(core.read_namespaced_pod(name, namespace))

    def open_stream() -> Iterable[str]:
        lines: Iterator[str] = watch.stream(  # type: ignore[no-untyped-call]
            core.read_namespaced_pod_log, name, namespace, container=chosen, follow=True
        )
        return lines

    stop: Callable[[], None] = watch.stop
    return PodStream(name, replica_label(name, job), started, open_stream, stop)


def _describe(error: Exception) -> str:
    detail = _message(error) if isinstance(error, ApiException) else str(error)
    return f"(cannot read the logs: {detail})"


def _message(error: ApiException) -> str:
    return str(status_of(error).get("message") or error.reason or error.status)


def _nothing_started(job: str, pods: list[V1Pod]) -> str:
    if not pods:
        return f"job {job!r} has no pods yet; wait until the operator creates them (`kubetrain get {job}`)"
    names = ", ".join(_name(pod) for pod in pods)
    return f"no pod of job {job!r} has started yet ({names}: Pending); try again later, or follow with -f"


def _name(pod: V1Pod) -> str:
    return str(pod.metadata.name) if pod.metadata and pod.metadata.name else ""


def _namespace(pod: V1Pod) -> str:
    return str(pod.metadata.namespace) if pod.metadata and pod.metadata.namespace else ""
