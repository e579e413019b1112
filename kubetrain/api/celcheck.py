"""The CEL rules of a CRD (`x-kubernetes-validations`), evaluated here as the API server evaluates them.

Why: the CRDs carry rules the structural schema cannot say (replica types, one Launcher, name lengths);
local validation must apply the same rules, not a hand-written twin that may drift. This walks a job beside
any structural schema and evaluates every rule it finds with `cel-python` (imported lazily: building its
parser costs about half a second, which only validation pays), with `self` bound to the node the rule is
attached to, after the API server's pruning of nulls. As on create:

- transition rules (those that read `oldSelf`) are skipped: they only apply to updates;
- the root's `self.metadata` holds `name` and `generateName` only;
- a rule's `fieldPath` names the field the error is reported at; its `message` is the message;
- a rule that cannot be evaluated (a missing key) rejects the object, as it does on the server.

`cel-python` has CEL's standard library; the Kubernetes string extensions the rules may use
(`lowerAscii`, `upperAscii`, `trim`, `replace`, `split`, `join`, `substring`, `charAt`, `indexOf`,
`lastIndexOf`) are added below. A rule using any other missing function fails to compile and is reported,
never silently passed; a unit test evaluates every rule of the generated CRDs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

from kubetrain.api.errors import FieldError
from kubetrain.api.schemacheck import Loc, prune_nulls
from kubetrain.api.wire_errors import format_path

if TYPE_CHECKING:
    import celpy

__all__ = ["cel_errors", "is_transition_rule"]

Schema = dict[str, Any]

_OLD_SELF = re.compile(r"\boldSelf\b")
_FIELD_PATH_PART = re.compile(r"\.([A-Za-z_$][A-Za-z0-9_$]*)|\[\s*'([^']*)'\s*\]|\[\s*(\d+)\s*\]")


def is_transition_rule(rule: str) -> bool:
    """True when `rule` compares with the stored object (`oldSelf`): it applies to updates only."""
    return _OLD_SELF.search(rule) is not None


def cel_errors(value: Any, schema: Schema) -> list[FieldError]:
    """The errors of every create-time CEL rule in `schema` for the decoded object `value`."""
    pruned = prune_nulls(value, schema)
    if isinstance(pruned, dict) and isinstance(pruned.get("metadata"), dict):
        metadata = pruned["metadata"]
        pruned["metadata"] = {k: metadata[k] for k in ("name", "generateName") if k in metadata}
    return list(_walk(pruned, schema, ()))


def _walk(value: Any, schema: Schema, loc: Loc) -> Iterator[FieldError]:
    for rule in schema.get("x-kubernetes-validations", []):
        if not is_transition_rule(rule["rule"]):
            yield from _evaluate(rule, value, loc)
    if isinstance(value, dict):
        properties: dict[str, Schema] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                yield from _walk(item, sub, (*loc, key))
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            yield from _walk(item, schema["items"], (*loc, index))


def _evaluate(rule: Schema, value: Any, loc: Loc) -> Iterator[FieldError]:
    where = format_path((*loc, *_field_path(rule.get("fieldPath", ""))))
    message, _, fix = str(rule.get("message") or f"failed rule: {rule['rule']}").rpartition("; ")
    if not message:
        message, fix = fix, ""
    try:
        result = _program(rule["rule"])(value)
    except Exception as error:
        yield FieldError(where, f"{message} (the rule could not be evaluated: {error})", fix)
        return
    if result is not True:
        yield FieldError(where, message, fix)


def _field_path(text: str) -> Loc:
    return tuple(
        int(index) if index else (name or key) for name, key, index in _FIELD_PATH_PART.findall(text)
    )


@cache
def _program(rule: str) -> Callable[[Any], object]:
    import celpy  # noqa: PLC0415 (lazy: see the module docstring)

    environment = _environment()
    program = environment.program(environment.compile(rule), functions=_functions())

    def run(value: Any) -> object:
        result = program.evaluate({"self": celpy.json_to_cel(value)})  # type: ignore[attr-defined]
        if isinstance(result, Exception):
            raise result
        return bool(result) if isinstance(result, celpy.celtypes.BoolType) else result

    return run


@cache
def _environment() -> celpy.Environment:
    import celpy  # noqa: PLC0415
    import lark  # noqa: PLC0415
    from celpy.evaluation import CELEvalError, Evaluator  # noqa: PLC0415

    class StrictHas(Evaluator):
        """`has(e.f)` is an error when `e` is (as in cel-go), not false as cel-python makes it."""

        def macro_has_eval(self, exprlist: lark.Tree[Any]) -> Any:
            node = exprlist
            while isinstance(node, lark.Tree) and node.data != "member_dot" and len(node.children) == 1:
                node = node.children[0]
            if isinstance(node, lark.Tree) and node.data == "member_dot":
                target = self.visit(node.children[0])
                if isinstance(target, CELEvalError):
                    return target
                if isinstance(target, celpy.celtypes.MapType):
                    return celpy.celtypes.BoolType(celpy.celtypes.StringType(str(node.children[1])) in target)
            return super().macro_has_eval(exprlist)

    class Runner(celpy.InterpretedRunner):
        def evaluate(self, context: Any) -> Any:
            return StrictHas(ast=self.ast, activation=self.new_activation()).evaluate(context)

    return celpy.Environment(runner_class=Runner)


@cache
def _functions() -> dict[str, Callable[..., Any]]:
    from celpy import celtypes  # noqa: PLC0415

    text, integer, listed = celtypes.StringType, celtypes.IntType, celtypes.ListType

    def index_of(s: str, sub: str, start: int = 0) -> Any:
        return integer(s.find(sub, start))

    return {
        "lowerAscii": lambda s: text("".join(c.lower() if c.isascii() else c for c in s)),
        "upperAscii": lambda s: text("".join(c.upper() if c.isascii() else c for c in s)),
        "trim": lambda s: text(s.strip()),
        "replace": lambda s, old, new, n=-1: text(s.replace(old, new, int(n))),
        "split": lambda s, sep, n=-1: listed([text(p) for p in s.split(sep, int(n) - 1 if n > 0 else -1)]),
        "join": lambda items, sep="": text(sep.join(items)),
        "substring": lambda s, start, end=None: text(s[int(start) : None if end is None else int(end)]),
        "charAt": lambda s, i: text(s[int(i)] if int(i) < len(s) else ""),
        "indexOf": index_of,
        "lastIndexOf": lambda s, sub: integer(s.rfind(sub)),
    }
