"""The table: one row per kind and mode over the runs, and the modes' ratio, each run beside its peer of
the same round."""

from __future__ import annotations

from collections.abc import Sequence

from recoverybench.cases import Mode
from recoverybench.run import Run


def _range(values: Sequence[float], fmt: str = "{:.1f}") -> str:
    if not values:
        return "-"
    low, high = min(values), max(values)
    return fmt.format(low) if fmt.format(low) == fmt.format(high) else f"{fmt.format(low)}-{fmt.format(high)}"


def _seconds(runs: Sequence[Run], limit: float, kill: int) -> str:
    """The range of the `kill`th recovery over the runs, and how many did not recover within `limit`; then,
    in brackets, the range of the part until the last restarted container was running again."""
    timed = [r.seconds[kill] for r in runs if len(r.seconds) > kill]
    kubelet = [c for r in runs if len(r.containers) > kill and (c := r.containers[kill]) is not None]
    done = [s for s in timed if s is not None]
    missing = len(timed) - len(done)
    text = _range(done) + " s" if done else "-"
    if missing:
        text += f"; {missing} of {len(timed)} not within {limit:.0f} s"
    return text + (f" ({_range(kubelet, '{:.0f}')} s)" if kubelet else "")


def _set(values: Sequence[object]) -> str:
    distinct = sorted({"-" if v is None else str(v) for v in values})
    return "/".join(distinct)


def how(run: Run) -> str:
    """How the gang came back: the pods kept (in place) or made again."""
    if run.mode is Mode.ON_FAILURE:
        return "kubelet restarts each container"
    if run.gang_mode:
        return run.gang_mode
    return "recreate (no mode in the ledger)" if run.pods_replaced else "in place (no mode in the ledger)"


def table(rounds: Sequence[Sequence[Run]], limit: float) -> str:
    """Markdown: kind x mode rows, a column per kill, then the ratio RestartGang / OnFailure per kind."""
    runs = [r for round_ in rounds for r in round_]
    kinds = list(dict.fromkeys(r.kind for r in runs))
    kills = max((len(r.seconds) for r in runs), default=1)
    timed = "".join(f" kill {k + 1}: every rank training again (containers running) |" for k in range(kills))
    lines = [
        f"| kind | mode | how |{timed} pods replaced | gang restarts (ledger) | replicaStatuses restarts "
        "| container restarts | runs |",
        "|---|---|---|" + "---|" * kills + "---|---|---|---|---|",
    ]
    for kind in kinds:
        for mode in Mode:
            mine = [r for r in runs if r.kind == kind and r.mode is mode]
            if not mine:
                continue
            cells = [
                kind, mode.value, _set([how(r) for r in mine]),
                *(_seconds(mine, limit, k) for k in range(kills)),
                _set([f"{r.pods_replaced}/{r.pods}" for r in mine]), _set([r.gang_restarts for r in mine]),
                _set([r.replica_restarts for r in mine]), _set([r.container_restarts for r in mine]),
                str(len(mine)),
            ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *(line for k in range(kills) for line in ratios(rounds, kinds, k))]
    return "\n".join(lines)


def ratios(rounds: Sequence[Sequence[Run]], kinds: Sequence[str], kill: int) -> list[str]:
    """Per kind, RestartGang's time over OnFailure's at the `kill`th kill, each beside its round's peer."""
    out = []
    for kind in kinds:
        values = []
        for round_ in rounds:
            pair = {r.mode: r.seconds[kill] for r in round_ if r.kind == kind and len(r.seconds) > kill}
            gang, each = pair.get(Mode.RESTART_GANG), pair.get(Mode.ON_FAILURE)
            if gang is not None and each:
                values.append(gang / each)
        if values:
            spread = _range(values, "{:.2f}")
            out.append(
                f"- {kind}, kill {kill + 1}: RestartGang / OnFailure time {spread}x over {len(values)} rounds"
            )
    return out


def run_line(run: Run) -> str:
    seconds = ", ".join(
        ("not recovered" if s is None else f"{s:.1f} s")
        + (f" (containers running at {c:.0f} s)" if c is not None else "")
        for s, c in zip(run.seconds, run.containers + (None,) * len(run.seconds), strict=False)
    )
    return (
        f"  {run.kind} {run.mode.value}: {seconds}; {how(run)}; gang restarts {run.gang_restarts}; "
        f"replicaStatuses restarts {run.replica_restarts}; container restarts {run.container_restarts}"
        + (f"; Restarting: {run.restarting}" if run.restarting else "")
    )
