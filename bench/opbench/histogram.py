"""The reconcile-time histogram an operator serves on /metrics, read back as a count and quantiles.

controller-runtime's `controller_runtime_reconcile_time_seconds` (kubetrain serves the same family, with the
same meaning): cumulative `_bucket{le=...}` lines per controller. The quantiles are bucket bounds, the
precision the histogram has: "p99 <= 0.05 s" means 99 % of reconciles took at most the 0.05 s bucket.
"""

from __future__ import annotations

import math
import re
import urllib.request
from dataclasses import dataclass

__all__ = ["FAMILY", "ReconcileTimes", "parse_reconcile_times", "scrape_reconcile_times"]

FAMILY = "controller_runtime_reconcile_time_seconds"
_BUCKET = re.compile(rf"^{FAMILY}_bucket\{{(?P<labels>[^}}]*)\}}\s+(?P<value>\S+)", re.MULTILINE)
_LE = re.compile(r'(?:^|,)le="(?P<le>[^"]+)"')


@dataclass(frozen=True)
class ReconcileTimes:
    """How many reconciles the histogram counted, and its 50th and 99th percentiles (bucket bounds, s)."""

    count: int
    p50: float | None
    p99: float | None


def parse_reconcile_times(text: str) -> ReconcileTimes:
    """The histogram in a /metrics text, summed over its controllers."""
    cumulative: dict[float, float] = {}
    for match in _BUCKET.finditer(text):
        le = _LE.search(match["labels"])
        if le is None:
            continue
        bound = math.inf if le["le"] == "+Inf" else float(le["le"])
        cumulative[bound] = cumulative.get(bound, 0.0) + float(match["value"])
    count = int(cumulative.get(math.inf, 0.0))
    return ReconcileTimes(count, _quantile(cumulative, 0.5), _quantile(cumulative, 0.99))


def _quantile(cumulative: dict[float, float], q: float) -> float | None:
    total = cumulative.get(math.inf, 0.0)
    if total <= 0:
        return None
    return next(bound for bound in sorted(cumulative) if cumulative[bound] >= q * total)


def scrape_reconcile_times(url: str, timeout: float = 5.0) -> ReconcileTimes:
    """GET `url` (an operator's /metrics) and read its reconcile histogram."""
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return parse_reconcile_times(answer.read().decode())
