"""What ``--cluster existing`` leaves as it is: the cluster's CNI and kube-proxy settings.

cnibench measures a cluster it did not create as it is. A cluster setting that cnibench would
have to make happen there is refused before anything is created (:func:`existing_refusal`,
asked through :meth:`KubeBackend.unsupported <cnibench.backends.kube.KubeBackend.unsupported>`),
so the conditions needing it are skipped up front with that reason:

- ``napi=threaded`` rewrites every node's receive path;
- ``kube-proxy=MODE`` is kube-proxy's mode (the cluster's own mode decides which Service
  conditions run: ``--proxy``);
- ``gateway=traefik`` installs Traefik with the Gateway API CRDs and a GatewayClass,
  cluster-wide;
- encryption (the wireguard scenario's ``on`` conditions) is the CNI's configuration.

Options that only say what the running CNI is (Cilium's ``mode`` and ``features``, Antrea's
``features``: what cnibench expects to find, e.g. which workloads must be rolled out) and
inputs of cnibench's own session objects (``egress-ip-range``) are taken: they change nothing
of the cluster.
"""

from __future__ import annotations

from cnibench.backends.base import ClusterSpec

__all__ = ["NEVER_CHANGES", "existing_refusal"]

NEVER_CHANGES = "--cluster existing never changes the cluster's CNI or kube-proxy settings"
"""The reason, after the setting, why a condition needing a setting is skipped there."""

_INSTALLS_GATEWAY = (
    "--cluster existing never installs a Gateway API implementation (its CRDs and GatewayClass"
    " are cluster-wide): use the CNI's own, if the cluster runs it (e.g. cilium:gateway-api)"
)


def existing_refusal(spec: ClusterSpec) -> str:
    """Why a cluster of ``spec`` cannot be had on an existing cluster without changing it (one
    line naming the setting first), or ``""``. Pure.

    >>> existing_refusal(ClusterSpec("cilium", options={"napi": "threaded"}))
    "napi=threaded: --cluster existing never changes the cluster's CNI or kube-proxy settings"
    >>> existing_refusal(ClusterSpec("cilium", options={"mode": "kube-proxy"}))
    ''
    """
    if spec.encryption:
        return f"encryption {spec.encryption}: {NEVER_CHANGES}"
    napi = spec.options.get("napi", "inline")
    if napi != "inline":
        return f"napi={napi}: {NEVER_CHANGES}"
    if "kube-proxy" in spec.options:
        return (
            f"kube-proxy={spec.options['kube-proxy']}: {NEVER_CHANGES} (its Services go"
            " through the proxy it runs; --proxy chooses the conditions)"
        )
    if spec.options.get("gateway"):
        return f"gateway={spec.options['gateway']}: {_INSTALLS_GATEWAY}"
    return ""
