"""The public names of kubetrain.common's runtime modules are deliberate: this test pins them.

Adding or removing a public name is an API change: update this list in the same change.
"""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "": ["Operator", "OperatorConfig", "run"],
    "cmdline": [
        "DEFAULTS", "FlagDefaults", "Section", "add_operator_flags", "config_from_args", "operator_parser",
        "parse_address", "run",
    ],
    "flagvalues": [
        "DNS_SUBDOMAIN", "SERVICE_ACCOUNT_NAMESPACE_FILE", "Address", "BoolFlag", "FlagError",
        "leader_election", "own_namespace", "parse_address", "parse_namespaces", "split_list",
    ],
    "logformat": ["JsonFormatter", "LogFormat", "TextFormatter", "configure_logging"],
    "kueue": [
        "AUTO", "DEFAULT_KUEUE_CONFIG", "KueueIntegration", "NONE", "QUEUE_LABEL", "RESOURCE_FLAVORS",
        "WORKLOADS", "parse_setting", "resolve", "workload_name",
    ],
    "operator": ["Clients", "ConnectError", "Operator", "OperatorConfig"],
    "clock": ["Clock", "SystemClock", "wait_with_deadline"],
    "controller": ["Controller"],
    "errors": [
        "AlreadyExists", "ApiError", "Conflict", "Forbidden", "Gone", "Invalid", "InvalidSpec",
        "KubetrainError", "LeadershipLost", "NotFound", "ServerError", "TerminalError", "Timeout",
        "TooManyRequests", "TransportError", "Unauthorized", "error_from_status",
    ],
    "events": ["EventRecorder", "EventType", "KubeEventRecorder", "ObjectRef"],
    "expectations": ["DEFAULT_EXPECTATIONS_TTL", "Expectations"],
    "handlers": ["Enqueue", "Mapper", "for_controller_owner", "for_object"],
    "httpserver": ["Guard", "HealthServer", "ProbeServer", "STALL_AFTER"],
    "metricsauth": ["MetricsSecurity", "MetricsSetupError", "metrics_security"],
    "leader": ["LeaderElectionConfig", "LeaderElector", "default_identity"],
    "logs": ["ContextFilter", "ReconcileContext", "reconcile_context"],
    "manager": ["Manager"],
    "metrics": [
        "EVENT_DROP_REASONS", "Metrics", "QueueMetrics", "RECONCILE_RESULTS", "REST_ERROR_CODE",
        "SKIP_MANAGED_BY",
    ],
    "queue": ["QueueShutDown", "WorkQueue"],
    "ratelimit": [
        "BucketRateLimiter", "ItemExponentialRateLimiter", "MaxOfRateLimiter", "RateLimiter", "TokenBucket",
        "default_controller_rate_limiter",
    ],
    "reconcile": ["Reconciler", "Request", "Result"],
    "testing": ["EPOCH", "FakeClock", "MemoryEventRecorder", "RecordedEvent", "settle"],
    "kube.client": [
        "ApiClient", "DEFAULT_FIELD_MANAGER", "JsonPatch", "LabelSelector", "ObjectList", "PatchType",
        "Propagation", "WatchEvent", "WatchEventType",
    ],
    "kube.fake": ["Call", "InMemoryApiClient"],
    "kube.fake_watch": ["EventKey", "WatchHub"],
    "kube.informer": [
        "CacheSyncError", "ControllerKind", "Informer", "ResourceEventHandler", "strip_managed_fields",
    ],
    "kube.objects": [
        "annotations", "controller_of", "generation", "is_deleting", "labels", "name", "namespace",
        "owner_reference", "request_for", "resource_version", "uid",
    ],
    "kube.patches": ["json_patch", "merge_patch"],
    "kube.resources": [
        "CONFIGMAPS", "EVENTS", "HPAS", "JOBS", "LEASES", "NAMESPACES", "NODES", "Obj", "PODS", "Resource",
        "SCHED_PODGROUPS", "SECRETS", "SERVICES", "SERVICE_ACCOUNTS", "VOLCANO_PODGROUPS",
    ],
    "kube.rest": ["Credentials", "KubeApiClient", "load_credentials"],
    "kube.selectors": ["Matcher", "field_matcher", "format_labels", "label_matcher"],
    "kube.store": [
        "INDEX_CONTROLLER_UID", "INDEX_JOB_NAME", "IndexFn", "JOB_NAME_LABEL", "Store", "by_controller_uid",
        "by_namespaced_label",
    ],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_are_pinned_and_exist(module: str) -> None:
    mod = importlib.import_module(f"kubetrain.common.{module}".rstrip("."))
    assert sorted(mod.__all__) == sorted(PUBLIC[module])
    for name in mod.__all__:
        assert hasattr(mod, name), f"kubetrain.common.{module}.__all__ names {name}, which does not exist"
    assert (mod.__doc__ or "").strip(), "every module says why it exists"
