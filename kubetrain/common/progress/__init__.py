"""The operator's side of training progress (KEP-2779): the status endpoint's checks and coalesced writes.

- `StatusReports`: the endpoint's decisions for one request (token, pod, job, body), transport apart.
- `Coalescer`: each job's latest report, written at most once per interval through a client of its own.
"""

from kubetrain.common.progress.coalesce import Coalescer, JobKey
from kubetrain.common.progress.endpoint import Answer, Authenticator, StatusReports

__all__ = ["Answer", "Authenticator", "Coalescer", "JobKey", "StatusReports"]
