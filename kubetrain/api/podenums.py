"""The closed sets of values the API server's pod validation accepts, as `enum`s for the CRDs' pod schema.

Why: Kubernetes' OpenAPI definitions (`podschema.py`'s source) give these fields as plain strings; the
server checks them only when a pod is created (`pkg/apis/core/validation/validation.go`). Without them a
job with `imagePullPolicy: Sometimes` was accepted by the CRD and by `kubetrain submit`, and then every
one of its pods was refused with 422. With them the API server refuses the job itself at create time, and
the local check (`schemacheck.py`, reading the same CRDs) says so, naming the field and the values allowed.

How the sets were chosen (Kubernetes v1.36.3, the plane's API server, function names below):
- Each set is what the server accepts for a pod, after the pod's defaulting. Where defaulting fills an
  empty string (`SetDefaults_Container`, `_PodSpec`, `_ContainerPort`, `_HTTPGetAction`, `_ImageVolume`),
  `""` is allowed, as the server allows it.
- Where a feature gate widens the set (container `restartPolicy` and restart rules, toleration `Lt`/`Gt`,
  SELinux `MountOption`), the set is the widest one, so no cluster's valid pod is refused; typos still are.
- Values that depend on another field (stop signals per OS), or are open-ended (`fieldRef.fieldPath` by
  API version, resource names) are left to the server.
- The pod-level `restartPolicy` of a template is not listed: the operator replaces it with the replica's
  `restartPolicy` (which the job's own schema restricts), so the server never sees the template's value.
"""

from __future__ import annotations

__all__ = ["POD_ENUMS"]

_CORE = "io.k8s.api.core.v1."
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."

_SELECTOR = ("In", "NotIn", "Exists", "DoesNotExist")

POD_ENUMS: dict[tuple[str, str], tuple[str, ...]] = {
    # validatePullPolicy (containers; image volumes), SetDefaults_Container / _ImageVolumeSource
    (_CORE + "Container", "imagePullPolicy"): ("Always", "IfNotPresent", "Never", ""),
    (_CORE + "ImageVolumeSource", "pullPolicy"): ("Always", "IfNotPresent", "Never", ""),
    # validateContainerCommon / SetDefaults_Container
    (_CORE + "Container", "terminationMessagePolicy"): ("File", "FallbackToLogsOnError", ""),
    # validateContainerRestartPolicy, validateInitContainerRestartPolicy (ContainerRestartRules on)
    (_CORE + "Container", "restartPolicy"): ("Always", "OnFailure", "Never"),
    (_CORE + "ContainerRestartRule", "action"): ("Restart", "RestartAllContainers"),
    (_CORE + "ContainerRestartRuleOnExitCodes", "operator"): ("In", "NotIn"),
    # validateResizePolicy
    (_CORE + "ContainerResizePolicy", "resourceName"): ("cpu", "memory"),
    (_CORE + "ContainerResizePolicy", "restartPolicy"): ("NotRequired", "RestartContainer"),
    # validateContainerPorts / SetDefaults_ContainerPort
    (_CORE + "ContainerPort", "protocol"): ("TCP", "UDP", "SCTP", ""),
    # validateHTTPGetAction / SetDefaults_HTTPGetAction
    (_CORE + "HTTPGetAction", "scheme"): ("HTTP", "HTTPS", ""),
    # validateDNSPolicy / SetDefaults_PodSpec; validatePreemptionPolicy
    (_CORE + "PodSpec", "dnsPolicy"): ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None", ""),
    (_CORE + "PodSpec", "preemptionPolicy"): ("PreemptLowerPriority", "Never"),
    # validateOS
    (_CORE + "PodOS", "name"): ("linux", "windows"),
    # validatePodSecurityContext and its helpers; validateProcMountType
    (_CORE + "PodSecurityContext", "fsGroupChangePolicy"): ("OnRootMismatch", "Always"),
    (_CORE + "PodSecurityContext", "supplementalGroupsPolicy"): ("Merge", "Strict"),
    (_CORE + "PodSecurityContext", "seLinuxChangePolicy"): ("Recursive", "MountOption"),
    (_CORE + "SecurityContext", "procMount"): ("Default", "Unmasked"),
    (_CORE + "SeccompProfile", "type"): ("Localhost", "RuntimeDefault", "Unconfined"),
    (_CORE + "AppArmorProfile", "type"): ("Localhost", "RuntimeDefault", "Unconfined"),
    # validateTolerations, validateTaintEffect (an empty effect matches every effect)
    (_CORE + "Toleration", "operator"): ("Equal", "Exists", "Lt", "Gt", ""),
    (_CORE + "Toleration", "effect"): ("NoSchedule", "PreferNoSchedule", "NoExecute", ""),
    # validateTopologySpreadConstraints
    (_CORE + "TopologySpreadConstraint", "whenUnsatisfiable"): ("DoNotSchedule", "ScheduleAnyway"),
    (_CORE + "TopologySpreadConstraint", "nodeAffinityPolicy"): ("Honor", "Ignore"),
    (_CORE + "TopologySpreadConstraint", "nodeTaintsPolicy"): ("Honor", "Ignore"),
    # ValidateNodeSelectorRequirement; apimachinery's ValidateLabelSelectorRequirement
    (_CORE + "NodeSelectorRequirement", "operator"): (*_SELECTOR, "Gt", "Lt"),
    (_META + "LabelSelectorRequirement", "operator"): _SELECTOR,
    # validateMountPropagation, validateMountRecursiveReadOnly
    (_CORE + "VolumeMount", "mountPropagation"): ("None", "HostToContainer", "Bidirectional"),
    (_CORE + "VolumeMount", "recursiveReadOnly"): ("Disabled", "IfPossible", "Enabled"),
    # validateHostPathType, validateAzureDisk, validateProjectionSources (podCertificate)
    (_CORE + "HostPathVolumeSource", "type"): (
        "",
        "DirectoryOrCreate",
        "Directory",
        "FileOrCreate",
        "File",
        "Socket",
        "CharDevice",
        "BlockDevice",
    ),
    (_CORE + "AzureDiskVolumeSource", "cachingMode"): ("None", "ReadOnly", "ReadWrite"),
    (_CORE + "AzureDiskVolumeSource", "kind"): ("Shared", "Dedicated", "Managed"),
    (_CORE + "PodCertificateProjection", "keyType"): (
        "RSA3072",
        "RSA4096",
        "ECDSAP256",
        "ECDSAP384",
        "ECDSAP521",
        "ED25519",
    ),
}
"""(definition, property) -> the values the API server accepts for a pod (see the module docstring)."""
