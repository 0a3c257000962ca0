"""What a running CNI's configuration allows one policy to carry, read from its ConfigMap.

A driver names the bound in its definition (:attr:`CniDefinition.policy_limit
<cnibench.backends.kube.cni_types.CniDefinition.policy_limit>`, e.g. Cilium's
``bpf-policy-map-max``); :func:`policy_rule_limit` reads it from the cluster. cnibench never
raises such a bound, on a cluster it made or one it was given: a condition beyond it is skipped
with the reason (:attr:`Policies.policy_rule_limit
<cnibench.backends.base.Policies.policy_rule_limit>`).
"""

from __future__ import annotations

from typing import Any

from cnibench.backends.kube.cni_types import ConfigLimit
from cnibench.policy import PolicyRuleLimit

__all__ = ["policy_rule_limit"]


def policy_rule_limit(core: Any, limit: ConfigLimit) -> PolicyRuleLimit | None:
    """The most rules one policy may carry as ``limit``'s ConfigMap sets it, or ``None`` when
    that cannot be told (the ConfigMap cannot be read, or the value is not a whole number):
    then nothing is skipped for it, and a policy the CNI cannot hold fails where it is applied.

    Each rule takes at least one of what ``limit`` counts, so its value bounds the rules. A key
    that is absent is the CNI's default; a value outside what the CNI takes is the nearest it
    takes.

    Parameters
    ----------
    core:
        :class:`kubernetes.client.CoreV1Api` of the cluster.
    """
    from kubernetes.client.exceptions import ApiException

    where = f"{limit.namespace}/{limit.config_map}"
    try:
        config_map = core.read_namespaced_config_map(limit.config_map, limit.namespace)
    except ApiException:
        return None
    text = (config_map.data or {}).get(limit.key)
    if text is None:
        value, said = limit.default, f"{limit.key} unset in {where}, so {limit.default}"
    else:
        try:
            value = int(str(text).strip())
        except ValueError:
            return None
        said = f"{limit.key}={value} in {where}"
    low, high = limit.takes
    if not low <= value <= high:
        value = min(max(value, low), high)
        said += f", taken as {value}"
    return PolicyRuleLimit(value, f"{said}: at most {value} {limit.counts}")
