"""The HTTP/1.1 parsers beside one another, on what the operator's client and server handle.

    python bench/http_parsers.py [--rounds 5] [--out bench/results/http_parsers.md]

Rows, each the best of --rounds (CPU time of this process, so a loaded machine skews less):
- a watch: 1,000 events of ~600 bytes, each its own chunk, parsed as the API client parses them (ours:
  httptools via `kubetrain.common.kube.httpmessage`; beside it h11's client side on the same bytes);
- a 1 KiB response with Content-Length, the head and body of a typical GET or PATCH answer;
- a request head encoded with 5 headers (one a 900-byte token) and a body: ours (validated fields
  joined) vs h11's `Connection.send`;
- a probe request parsed and answered by the health server (h11), per request.
Prints a Markdown table and writes it to --out. Lower is better; only ratios on one machine mean much.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import h11

from kubetrain.common.kube.http import HttpClient
from kubetrain.common.kube.httpmessage import _Message

ROOT = Path(__file__).resolve().parent.parent
EVENT = (
    b'{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"p","resourceVersion":"1"},"x":"'
    + (b"a" * 500)
    + b'"}}\n'
)
WATCH = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    + b"".join(b"%x\r\n%s\r\n" % (len(EVENT), EVENT) for _ in range(1000))
    + b"0\r\n\r\n"
)
BODY = b"x" * 1024
SMALL = (
    b"HTTP/1.1 200 OK\r\nAudit-Id: 5f1e\r\nCache-Control: no-cache, private\r\n"
    b"Content-Type: application/json\r\nDate: Fri, 27 Nov 2026 03:00:00 GMT\r\nContent-Length: 1024\r\n\r\n"
    + BODY
)
HEADERS = {
    "Accept": "application/json",
    "Content-Type": "application/merge-patch+json",
    "User-Agent": "kubetrain",
    "Authorization": "Bearer " + "x" * 900,
}
PROBE = b"GET /healthz HTTP/1.1\r\nHost: 10.0.0.5:8081\r\nUser-Agent: kube-probe/1.34\r\nAccept: */*\r\n\r\n"


def feed_ours(raw: bytes, piece: int = 65536) -> int:
    message = _Message(head_only=False)
    got = 0
    for start in range(0, len(raw), piece):
        message.feed(raw[start : start + piece])
        got += len(message.take() or b"")
    assert message.done
    return got


def feed_h11(raw: bytes, piece: int = 65536) -> int:
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    got = 0
    for start in range(0, len(raw), piece):
        conn.receive_data(raw[start : start + piece])
        while (event := conn.next_event()) is not h11.NEED_DATA:
            if isinstance(event, h11.Data):
                got += len(event.data)
            if isinstance(event, h11.EndOfMessage):
                return got
    return got


def encode_ours(client: HttpClient) -> bytes:
    return client._encode(
        "PATCH",
        "/apis/kubeflow.org/v1/namespaces/d/pytorchjobs/j/status",
        {"fieldManager": "k"},
        HEADERS,
        BODY,
    )


def encode_h11() -> bytes:
    conn = h11.Connection(h11.CLIENT)
    target = "/apis/kubeflow.org/v1/namespaces/d/pytorchjobs/j/status?fieldManager=k"
    headers = [("Host", "127.0.0.1:6443"), *HEADERS.items(), ("Content-Length", str(len(BODY)))]
    out = conn.send(h11.Request(method="PATCH", target=target, headers=headers))
    return out + conn.send(h11.Data(data=BODY)) + conn.send(h11.EndOfMessage())


def serve_h11() -> bytes:
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(PROBE)
    assert isinstance(conn.next_event(), h11.Request)
    assert isinstance(conn.next_event(), h11.EndOfMessage)
    headers = [("Content-Type", "text/plain"), ("Content-Length", "2"), ("Connection", "keep-alive")]
    return conn.send(h11.Response(status_code=200, headers=headers)) + conn.send(h11.Data(data=b"ok"))


def best(fn: Callable[[], object], number: int, rounds: int) -> float:
    """Best seconds per call over `rounds` runs of `number` calls, in process CPU time."""
    times = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(number):
            fn()
        times.append((time.process_time() - start) / number)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "http_parsers.md")
    args = parser.parse_args()
    client = asyncio.run(_client())
    rows = [
        (
            "1,000 chunked watch events",
            "httptools (ours)",
            best(lambda: feed_ours(WATCH), 20, args.rounds),
            "ms",
        ),
        ("1,000 chunked watch events", "h11", best(lambda: feed_h11(WATCH), 5, args.rounds), "ms"),
        ("1 KiB response", "httptools (ours)", best(lambda: feed_ours(SMALL), 5000, args.rounds), "µs"),
        ("1 KiB response", "h11", best(lambda: feed_h11(SMALL), 2000, args.rounds), "µs"),
        (
            "request head + 1 KiB body, encoded",
            "ours (validated)",
            best(lambda: encode_ours(client), 5000, args.rounds),
            "µs",
        ),
        ("request head + 1 KiB body, encoded", "h11", best(encode_h11, 2000, args.rounds), "µs"),
        ("probe parsed and answered (server)", "h11", best(serve_h11, 2000, args.rounds), "µs"),
    ]
    lines = ["| work | parser | cost |", "| --- | --- | ---: |"]
    for work, name, seconds, unit in rows:
        value = seconds * (1e3 if unit == "ms" else 1e6)
        lines.append(f"| {work} | {name} | {value:.1f} {unit} |")
    table = "\n".join(lines)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table + "\n")


async def _client() -> HttpClient:
    return HttpClient("https://127.0.0.1:6443")


if __name__ == "__main__":
    main()
