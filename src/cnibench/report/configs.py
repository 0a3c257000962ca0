"""What a CNI configuration sets on the data path, so that a comparison changes one thing.

A result's ``cni`` column is a configuration label (``cilium:napi=threaded``,
``flannel:kube-proxy=nftables``): a CNI name and the cluster options it ran with. Two
configurations are compared *as CNIs* only when every option that touches the data path is
equal, and two configurations of one CNI only when exactly one such option differs (a
*configuration contrast*, e.g. kube-proxy nftables against iptables). Anything else is
confounded and never a finding (:func:`cnibench.report.verdict.plan_contrasts` lists it under
"not compared: confounded by ...").

The factors, with the value each takes when the label does not name it:

``napi``
    ``inline`` or ``threaded``. ``threaded`` is cnibench's own instrument for per-node CPU
    (each node receives in threads of its own); it moves throughput and latency
    (:data:`INSTRUMENT_FACTOR`), so an instrumented configuration states only CPU and memory
    (:func:`instrumented`).
``service proxy``
    What serves ClusterIP Services: ``kube-proxy iptables`` by default, ``kube-proxy
    nftables``, or a CNI's own (``cilium eBPF`` in Cilium's default ``mode=kpr``), as the CNI's
    driver declares (``CniDriver.service_proxy``). Not a factor on the lab.
``encryption``
    ``""`` or ``wireguard``.
``gateway``
    The Gateway API implementation (``traefik``): on the data path of the ``split`` scenario
    only (:data:`GATEWAY_SCENARIOS`); elsewhere its idle pods touch no packet of the
    measurement.
any other option
    Taken as a factor (a CNI feature switched on, e.g. ``l7``), with ``""`` when absent: when
    unsure, a comparison is refused rather than confounded.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cnibench.errors import ConfigError

__all__ = [
    "CONTROL_VALUES",
    "GATEWAY_SCENARIOS",
    "INSTRUMENT_FACTOR",
    "Configuration",
    "configuration",
    "differing_factors",
    "factor_words",
    "instrumented",
]

INSTRUMENT_FACTOR = "napi"
"""The factor whose non-default value (``threaded``) is cnibench's per-node CPU instrument."""

INSTRUMENTED_VALUE = "threaded"
""":data:`INSTRUMENT_FACTOR`'s value that instruments a configuration."""

GATEWAY_SCENARIOS = frozenset({"split"})
"""Scenarios whose measured traffic crosses the Gateway API implementation."""

CONTROL_VALUES: Mapping[str, str] = {
    "napi": "inline",
    "service proxy": "kube-proxy iptables",
    "encryption": "",
    "gateway": "",
}
"""The value of each factor a configuration contrast takes as its control (the default a
cluster gets without the option); a factor not listed has ``""`` as its control."""


@dataclass(frozen=True)
class Configuration:
    """One CNI configuration of a result set.

    Attributes
    ----------
    label:
        The recorded ``cni`` label, e.g. ``cilium:napi=threaded``.
    name:
        The CNI (or lab datapath) name, e.g. ``cilium``.
    factors:
        Every data-path factor with its value (defaults filled in), sorted by name.
    """

    label: str
    name: str
    factors: tuple[tuple[str, str], ...]

    def factor(self, name: str) -> str:
        """The value of factor ``name`` (``""`` when the configuration does not set it)."""
        return dict(self.factors).get(name, CONTROL_VALUES.get(name, ""))

    def on_path(self, scenario: str) -> dict[str, str]:
        """The factors that touch the data path of ``scenario``."""
        return {
            key: value
            for key, value in self.factors
            if key != "gateway" or scenario in GATEWAY_SCENARIOS
        }


@functools.cache
def _service_proxy(name: str, options_json: str) -> str:
    # The CNI's driver knows what serves Services under its options (Cilium's default mode
    # replaces kube-proxy); imported only for Kubernetes results, so a lab report stays free
    # of the kube backend.
    from cnibench.backends.kube.cnis import DRIVERS

    options = json.loads(options_json)
    driver = DRIVERS.get(name)
    if driver is None:
        return f"kube-proxy {options.get('kube-proxy', 'iptables')}"
    return driver.service_proxy(options)


def configuration(label: str, *, backend: str, options: Mapping[str, str] | str) -> Configuration:
    """The data-path factors of one configuration.

    Parameters
    ----------
    label:
        The recorded ``cni`` label (``NAME`` or ``NAME:k=v,...``).
    backend:
        ``"lab"`` or ``"kube"`` (the records' ``backend``).
    options:
        The records' ``options`` (a mapping or its JSON text): the cluster options the run
        had, including ``encryption``.

    Returns
    -------
    Configuration

    Raises
    ------
    ConfigError
        ``options`` is not a JSON object.
    """
    if isinstance(options, str):
        try:
            loaded = json.loads(options) if options else {}
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{label}: options are not JSON ({exc.msg})") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{label}: options are not a JSON object")
        given = {str(k): str(v) for k, v in loaded.items()}
    else:
        given = {str(k): str(v) for k, v in options.items()}
    name = label.partition(":")[0]
    factors = {
        "napi": given.pop("napi", CONTROL_VALUES["napi"]),
        "encryption": given.pop("encryption", ""),
        "gateway": given.pop("gateway", ""),
    }
    if backend == "kube":
        service = {k: v for k, v in given.items() if k in ("mode", "kube-proxy")}
        factors["service proxy"] = _service_proxy(name, json.dumps(service, sort_keys=True))
        given.pop("mode", None)
        given.pop("kube-proxy", None)
    for key, value in given.items():
        factors[key] = value
    return Configuration(label, name, tuple(sorted(factors.items())))


def differing_factors(a: Configuration, b: Configuration, *, scenario: str) -> list[str]:
    """The factors on ``scenario``'s data path whose values differ between ``a`` and ``b``."""
    left, right = a.on_path(scenario), b.on_path(scenario)
    keys = sorted(set(left) | set(right))
    return [key for key in keys if left.get(key, "") != right.get(key, "")]


def factor_words(factors: Sequence[str], a: Configuration, b: Configuration) -> str:
    """``"napi (threaded vs inline), service proxy (cilium eBPF vs kube-proxy iptables)"``."""
    return ", ".join(
        f"{key} ({a.factor(key) or 'none'} vs {b.factor(key) or 'none'})" for key in factors
    )


def instrumented(config: Configuration) -> bool:
    """Whether the configuration carries the per-node CPU instrument (``napi=threaded``)."""
    return config.factor(INSTRUMENT_FACTOR) == INSTRUMENTED_VALUE
