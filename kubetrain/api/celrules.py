"""The CEL rules (`x-kubernetes-validations`) of the CRDs: what the Kubeflow operators reject at admission.

Why: the Kubeflow operators check job names, replica types, managedBy and the PyTorch/MPI specifics in an
admission webhook (or, for MPI, as soon as the controller sees the job). kubetrain ships no webhook: the
CRDs carry the same checks as CEL, so `kubectl apply` fails at once with a message that names the field
and the fix. Each rule has a twin in `validation.py`/`validation_kinds.py` (same condition, same field
path) so that local validation (`kubetrain run --local`, `submit`) says the same; transition rules
(immutability) need the stored object and exist only here. docs/validation.md lists every rule with its
Kubeflow source.

The API server estimates each rule's worst-case cost from the schema before it accepts the CRD; every map
a rule iterates is bounded (`maxProperties`: one entry per replica type), and strings a rule matches have
`maxLength`, so the rules stay far inside the budget.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.kinds import MPIJOB, PYTORCHJOB, TFJOB, KindInfo

__all__ = ["NAME_PATTERN", "NPROC_PATTERN", "add_rules"]

Schema = dict[str, Any]

NAME_PATTERN = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
"""DNS-1035 label: the job name starts every pod and Service name."""
NPROC_PATTERN = "^(auto|cpu|gpu|[1-9][0-9]*)$"
"""torchrun's --nproc-per-node values, as PyTorchJob `spec.nprocPerNode` takes them."""
_DNS_LABEL_MAX = 63
_MANAGED_BY = "(has({o}.runPolicy) && has({o}.runPolicy.managedBy) ? {o}.runPolicy.managedBy : '')"


def _rule(rule: str, message: str, field_path: str | None = None) -> Schema:
    out: Schema = {"rule": rule, "message": message}
    if field_path is not None:
        out["fieldPath"] = field_path
    return out


def _add(node: Schema, *rules: Schema) -> None:
    node.setdefault("x-kubernetes-validations", []).extend(rules)


def _has_type(rtype: str) -> str:
    return f"self.exists(k, k.lowerAscii() == '{rtype.lower()}')"


def _name_rules(info: KindInfo) -> list[Schema]:
    """The job name and its longest pod/Service name `<name>-<type>-<last index>` must be DNS-1035 labels."""
    field = info.replica_specs_field
    specs = f"self.spec.{field}"
    unset = " : ".join(
        [f"k.lowerAscii() == '{t.lower()}' ? {n}" for t, n in info.default_replicas.items() if n != 1] + ["1"]
    )  # the count an unset `replicas` defaults to
    replicas = f"(has({specs}[k].replicas) ? {specs}[k].replicas : ({unset}))"
    if info is MPIJOB:  # the launcher's pod is `<name>-launcher`, without an index
        suffix = f"(k.lowerAscii() == 'launcher' ? 1 : 2 + size(string({replicas} - 1)))"
        exists = f"(k.lowerAscii() == 'launcher' || {replicas} > 0)"
    else:
        suffix = f"(2 + size(string({replicas} - 1)))"
        exists = f"{replicas} > 0"
    length = (
        f"!has({specs}) || {specs}.all(k, !({exists}) || "
        f"size(self.metadata.name) + size(k) + {suffix} <= {_DNS_LABEL_MAX})"
    )
    return [
        _rule(
            f"self.metadata.name.matches('{NAME_PATTERN}')",
            "metadata.name must be a DNS-1035 label (lower-case letters, digits and '-', starting with a "
            "letter and ending with a letter or digit), because pod and Service names are built from it; "
            "rename the job, e.g. mnist-train-1",
            ".metadata.name",
        ),
        _rule(
            length,
            f"metadata.name is too long: the pod and Service names <name>-<replica type>-<index> must fit "
            f"in {_DNS_LABEL_MAX} characters; shorten the name",
            ".metadata.name",
        ),
    ]


def _replica_rules(info: KindInfo, specs: Schema) -> None:
    field = f"spec.{info.replica_specs_field}"
    names = ", ".join(f"'{rtype.lower()}'" for rtype in info.replica_types)
    specs["maxProperties"] = len(info.replica_types)  # bounds the cost of every rule iterating the map
    specs["minProperties"] = 1
    _add(
        specs,
        _rule(
            f"self.all(k, k.lowerAscii() in [{names}])",
            f"{field} keys must be replica types of {info.kind}: {', '.join(info.replica_types)} "
            "(in any letter case); rename or remove the others",
        ),
    )
    masters = sorted(info.master_types)
    if masters:  # none in JAXJob (only Workers) and PaddleJob (its Masters are parameter servers, any number)
        master_names = ", ".join(f"'{rtype.lower()}'" for rtype in masters)
        _add(
            specs,
            _rule(
                f"self.all(k, !(k.lowerAscii() in [{master_names}]) || !has(self[k].replicas) "
                "|| self[k].replicas == 1)",
                f"{field}: {' and '.join(masters)} must have replicas: 1 (one per job)"
                + ("; run more replicas as Workers" if "Worker" in info.replica_types else ""),
            ),
        )
    for rtype in info.required_types:  # MPIJob's Launcher, XGBoostJob's Master
        _add(specs, _rule(_has_type(rtype), f"{field}.{rtype} is required; add a {rtype} with replicas: 1"))


def _tf_rules(specs: Schema) -> None:
    _add(
        specs,
        _rule(
            f"!({_has_type('Chief')} && {_has_type('Master')})",
            "spec.tfReplicaSpecs: Chief and Master are the same role and a TFJob may have only one of them; "
            "keep Chief and remove Master",
        ),
    )


def _mpi_rules(specs: Schema) -> None:
    _add(
        specs,
        _rule(
            "self.all(k, k.lowerAscii() != 'worker' || (has(self[k].replicas) && self[k].replicas >= 1))",
            "spec.mpiReplicaSpecs.Worker.replicas must be 1 or more (unset means 0); set it, or remove the "
            "Worker spec to run on the launcher alone",
        ),
    )


def _pytorch_rules(spec: Schema) -> None:
    properties = spec["properties"]
    nproc = properties["nprocPerNode"]
    nproc["maxLength"] = 10  # "2147483647"; bounds the regular expression's cost (validation_kinds: same)
    _add(
        nproc,
        _rule(
            f"self.matches('{NPROC_PATTERN}')",
            "spec.nprocPerNode must be auto, cpu, gpu or a positive whole number written as a string, "
            'e.g. "2"',
        ),
    )
    _add(
        spec,
        _rule(
            "!has(self.elasticPolicy) || (has(self.pytorchReplicaSpecs) && "
            "self.pytorchReplicaSpecs.exists(k, k.lowerAscii() == 'worker'))",
            "spec.elasticPolicy needs a Worker replica spec (elastic training scales the Workers); "
            "add a Worker",
            ".elasticPolicy",
        ),
        _rule(
            "!(has(self.nprocPerNode) && has(self.elasticPolicy) && has(self.elasticPolicy.nProcPerNode))",
            "spec.elasticPolicy.nProcPerNode is deprecated and cannot be combined with spec.nprocPerNode; "
            "remove elasticPolicy.nProcPerNode",
            ".elasticPolicy.nProcPerNode",
        ),
    )
    _add(
        properties["elasticPolicy"],
        _rule(
            "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
            "spec.elasticPolicy.maxReplicas is less than minReplicas; set maxReplicas >= minReplicas",
            ".maxReplicas",
        ),
    )


def _run_policy_rules(info: KindInfo, spec: Schema) -> None:
    run_policy = spec["properties"]["runPolicy"]
    managed_by = run_policy["properties"]["managedBy"]
    values = ", ".join(f"'{value}'" for value in info.managed_by_values)
    managed_by["maxLength"] = 63  # longer than every allowed value; bounds the comparison's cost
    _add(
        managed_by,
        _rule(
            f"self in [{values}]",
            f"spec.runPolicy.managedBy must be {' or '.join(info.managed_by_values)}; remove it to let this "
            "operator run the job",
        ),
    )
    _add(
        spec,
        _rule(
            f"{_MANAGED_BY.format(o='self')} == {_MANAGED_BY.format(o='oldSelf')}",
            "spec.runPolicy.managedBy is immutable; delete the job and create it again to change its manager",
        ),
    )
    if info is not MPIJOB:  # kubeflow.org/v1 SchedulingPolicy marks the queue immutable; v2beta1 does not
        queue = run_policy["properties"]["schedulingPolicy"]["properties"]["queue"]
        _add(
            queue,
            _rule(
                "self == oldSelf",
                "spec.runPolicy.schedulingPolicy.queue is immutable; delete the job and create it again to "
                "change its queue",
            ),
        )


def add_rules(info: KindInfo, schema: Schema) -> None:
    """Attach the kind's CEL rules (and the bounds they need) to its CRD schema `schema`, in place."""
    spec = schema["properties"]["spec"]
    spec.setdefault("required", []).append(info.replica_specs_field)
    specs = spec["properties"][info.replica_specs_field]
    # A CRD may declare metadata.name (nothing else of metadata); declared, a rule's fieldPath can name it.
    schema["properties"]["metadata"] = {"type": "object", "properties": {"name": {"type": "string"}}}
    _add(schema, *_name_rules(info))
    _replica_rules(info, specs)
    _run_policy_rules(info, spec)
    if info is TFJOB:
        _tf_rules(specs)
    elif info is PYTORCHJOB:
        _pytorch_rules(spec)
    elif info is MPIJOB:
        _mpi_rules(specs)
    _own_rules(info, schema)


def _own_rules(info: KindInfo, schema: Schema) -> None:
    """The kind's `KindInfo.validations`, each at the node its `at` names."""
    for own in info.validations:
        node: Schema | None = schema
        for name in filter(None, own.at.split(".")):
            node = (node or {}).get("properties", {}).get(name)
        if node is None:
            raise ValueError(
                f"{info.kind} KindInfo.validations: at={own.at!r} names no field of the {info.kind} schema; "
                f"write a dotted path of wire names, e.g. 'spec' or 'spec.{info.replica_specs_field}'"
            )
        _add(node, _rule(own.rule, own.message, own.field_path))
