"""kubetrain's own job integration with Kueue (an "external framework" in Kueue's words).

For a job labelled `kueue.x-k8s.io/queue-name`, of a kind this integration manages (`integration.py`), the
operator makes the job's Workload (`workload.py`), creates no pod until Kueue admits it (`decide.py`),
places the pods where the admission says (`placement.py`), stops them when Kueue evicts the job and hands
the quota back, and tells the Workload what Kueue waits for (`wlstatus.py`). The reconcile step that uses
these lives in `kubetrain.common.job.queueing`; every kind built on `kubetrain.common` gets it.
"""

from kubetrain.common.kueue.integration import (
    AUTO,
    DEFAULT_KUEUE_CONFIG,
    NONE,
    KueueIntegration,
    parse_setting,
    resolve,
)
from kubetrain.common.kueue.names import QUEUE_LABEL, RESOURCE_FLAVORS, WORKLOADS, workload_name

__all__ = [
    "AUTO",
    "DEFAULT_KUEUE_CONFIG",
    "NONE",
    "QUEUE_LABEL",
    "RESOURCE_FLAVORS",
    "WORKLOADS",
    "KueueIntegration",
    "parse_setting",
    "resolve",
    "workload_name",
]
