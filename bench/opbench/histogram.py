"""The reconcile-time histogram an operator serves on /metrics, read back as a count and quantiles.

controller-runtime's `controller_runtime_reconcile_time_seconds` (kubetrain serves the same family, with the
same meaning): cumulative `_bucket{le=...}` lines per controller. The quantiles are bucket bounds, the
precision the histogram has: "p99 <= 0.05 s" means 99 % of reconciles took at most the 0.05 s bucket.

Beside it, where the process serves it (kubetrain does, as client-go does; controller-runtime's operators do
not), `rest_client_rate_limiter_duration_seconds`: how long its requests waited for the client's own rate
limiter. A reconcile's time includes those waits, so this says how much of a slow tail is self-throttling.
"""

from __future__ import annotations

import math
import re
import urllib.request
from dataclasses import dataclass

__all__ = ["FAMILY", "ReconcileTimes", "parse_reconcile_times", "scrape_reconcile_times"]

FAMILY = "controller_runtime_reconcile_time_seconds"
THROTTLE_FAMILY = "rest_client_rate_limiter_duration_seconds"
_LE = re.compile(r'(?:^|,)le="(?P<le>[^"]+)"')


@dataclass(frozen=True)
class ReconcileTimes:
    """How many reconciles the histogram counted, and its 50th and 99th percentiles (bucket bounds, s)."""

    count: int
    p50: float | None
    p99: float | None
    throttle_p99: float | None = None
    """99th percentile of the client's rate-limiter waits per request (None: not served, or no request)."""


def parse_reconcile_times(text: str) -> ReconcileTimes:
    """The histogram in a /metrics text, summed over its controllers; with the rate-limiter waits."""
    cumulative = _cumulative(text, FAMILY)
    throttle = _cumulative(text, THROTTLE_FAMILY)
    count = int(cumulative.get(math.inf, 0.0))
    return ReconcileTimes(
        count, _quantile(cumulative, 0.5), _quantile(cumulative, 0.99), _quantile(throttle, 0.99)
    )


def _cumulative(text: str, family: str) -> dict[float, float]:
    """`family`'s cumulative bucket counts by upper bound, summed over every other label."""
    bucket = re.compile(rf"^{family}_bucket\{{(?P<labels>[^}}]*)\}}\s+(?P<value>\S+)", re.MULTILINE)
    cumulative: dict[float, float] = {}
    for match in bucket.finditer(text):
        le = _LE.search(match["labels"])
        if le is None:
            continue
        bound = math.inf if le["le"] == "+Inf" else float(le["le"])
        cumulative[bound] = cumulative.get(bound, 0.0) + float(match["value"])
    return cumulative


def _quantile(cumulative: dict[float, float], q: float) -> float | None:
    total = cumulative.get(math.inf, 0.0)
    if total <= 0:
        return None
    return next(bound for bound in sorted(cumulative) if cumulative[bound] >= q * total)


def scrape_reconcile_times(url: str, timeout: float = 5.0) -> ReconcileTimes:
    """GET `url` (an operator's /metrics) and read its reconcile histogram."""
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return parse_reconcile_times(answer.read().decode())
