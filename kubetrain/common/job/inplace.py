"""In-place gang restarts: the kubelet's `RestartAllContainers` rule, rendered from a job's failure policy.

From Kubernetes 1.36 a container may carry restart rules (KEP-5307) with the action `RestartAllContainers`
(KEP-5532): when it exits with a matching code, the kubelet kills and removes every container of its pod,
init containers included, and starts them again in the same sandbox. The pod keeps its name, UID, IP and
node: nothing is scheduled again and no DNS record changes. The kubelet applies no CrashLoopBackOff to
such a restart (the old containers are gone), raises every container's `restartCount` by one, and keeps
the exit that triggered it in the container's `lastState`.

A job whose failure policy restarts the gang on a rank's exit gives each rank's main container that rule,
for exactly the exit codes whose decision is `RestartGang` for its replica type, whatever the failure's
reason. The rules are walked in order, as `failurepolicy.rule_for` walks them:
- a rule for other replica types, or one that matches only reasons a container exit never has (`Evicted`,
  `DeadlineExceeded`, `NodeLost`, `ProgressStalled`), never decides a container exit: skipped;
- a rule that also names container reasons (`OOMKilled`, `Error`) decides its codes by the reason, which
  an exit-code rule cannot see: its codes are left to the container's own restartPolicy, and the
  operator's recreating gang restart handles them as before;
- otherwise the rule decides its codes (all of them without `onExitCodes`): in the rule when its action
  is `RestartGang`. Exit code 0 never is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubetrain.common.job.failurepolicy import Action, FailurePolicy, FailureReason, FailureRule
from kubetrain.common.kube.resources import Obj

__all__ = ["in_place_codes", "restart_rule", "with_restart_rule"]

RESTART_ALL = "RestartAllContainers"
_CODES = frozenset(range(1, 256))
_POD_REASONS = frozenset(
    {
        FailureReason.EVICTED,
        FailureReason.DEADLINE_EXCEEDED,
        FailureReason.NODE_LOST,
        FailureReason.PROGRESS_STALLED,
    }
)
"""Reasons of a pod or a gang, never of a container's exit."""


def in_place_codes(policy: FailurePolicy, rtype: str) -> frozenset[int]:
    """The exit codes of a `rtype` rank's main container whose decision is `RestartGang` by code alone."""
    undecided, chosen = set(_CODES), set()
    for rule in policy.rules:
        if not _applies(rule, rtype):
            continue
        codes = undecided & (set(rule.on_exit_codes) if rule.on_exit_codes is not None else _CODES)
        undecided -= codes
        if rule.on_reasons is None and rule.action is Action.RESTART_GANG:
            chosen |= codes
    return frozenset(chosen)


def _applies(rule: FailureRule, rtype: str) -> bool:
    """Whether `rule` may decide a container exit of `rtype`."""
    if rule.replica_types is not None and rtype not in rule.replica_types:
        return False
    return rule.on_reasons is None or not set(rule.on_reasons) <= _POD_REASONS


def restart_rule(codes: Iterable[int]) -> dict[str, Any] | None:
    """The container restart rule for `codes` (the shorter of `In` and `NotIn`), None for no codes."""
    chosen = sorted(set(codes) & _CODES)
    if not chosen:
        return None
    others = sorted(set(range(256)) - set(chosen))
    if len(others) < len(chosen):
        return {"action": RESTART_ALL, "exitCodes": {"operator": "NotIn", "values": others}}
    return {"action": RESTART_ALL, "exitCodes": {"operator": "In", "values": chosen}}


def with_restart_rule(pod: Obj, container: dict[str, Any], rule: dict[str, Any]) -> Obj:
    """`pod` with `rule` first among `container`'s restart rules (one of `pod`'s containers, changed in
    place). The container's restartPolicy, which the API server requires beside rules, is the pod's."""
    container.setdefault("restartPolicy", pod["spec"].get("restartPolicy") or "Always")
    container["restartPolicyRules"] = [rule, *(container.get("restartPolicyRules") or ())]
    return pod
