"""An operator's log lines: JSON objects for log collectors, or plain text for people, on stderr.

`--log-format` and `--log-level` (`kubetrain.common.cmdline`) choose them, for `kubetrain operator` and for
an operator of one's own kinds alike.

Both carry the reconcile context that `kubetrain.common.logs.ContextFilter` puts on each record: the
controller, the job's namespace and name, and the reconcile id, so that every line about one job (and
one pass over it) can be found with one query. JSON keys: `time` (RFC 3339, UTC), `level`, `logger`,
`msg`, then `controller`, `namespace`, `name`, `reconcile_id` inside a reconcile, and `error` with the
traceback when there is one.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TextIO

from kubetrain.common.logs import ContextFilter

__all__ = ["JsonFormatter", "LogFormat", "TextFormatter", "configure_logging"]

_NOISY = ("asyncio",)


class LogFormat(StrEnum):
    JSON = "json"
    TEXT = "text"


def _context(record: logging.LogRecord) -> dict[str, str]:
    """The reconcile context of a record ({} outside a reconcile)."""
    request = getattr(record, "request", "-")
    if request in ("-", None):
        return {}
    namespace, _, name = str(request).rpartition("/")
    return {
        "controller": str(getattr(record, "controller", "-")),
        "namespace": namespace,
        "name": name,
        "reconcile_id": str(getattr(record, "reconcile_id", "-")),
    }


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_context(record),
        }
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """`time level logger: message [controller namespace/name #reconcile-id]`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        ctx = _context(record)
        if not ctx:
            return text
        head, newline, rest = text.partition("\n")  # keep a traceback below the context
        where = f"[{ctx['controller']} {ctx['namespace']}/{ctx['name']} #{ctx['reconcile_id']}]"
        return f"{head} {where}{newline}{rest}"


def configure_logging(log_format: LogFormat, level: str, *, stream: TextIO | None = None) -> None:
    """Route every logger to one handler on `stream` (stderr) in `log_format`, at `level` and above."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if log_format is LogFormat.JSON else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _NOISY:  # their INFO lines say nothing an operator's user needs
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
