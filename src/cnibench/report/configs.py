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
    driver declares (``CniDriver.service_proxy``). Not a factor on the lab. Two service proxies
    are compared only on a condition whose traffic goes to a Service
    (:meth:`~cnibench.scenarios.base.Scenario.through_service`): pod-to-pod traffic meets no
    Service proxy, so a difference there would be something else's.
``encryption``
    ``""`` or ``wireguard``.
``gateway``
    The Gateway API implementation (``traefik``): on the data path of the ``split`` scenario
    only (:data:`GATEWAY_SCENARIOS`); elsewhere its idle pods touch no packet of the
    measurement.
any other option
    Taken as a factor (a CNI feature switched on, e.g. ``l7``), with ``""`` when absent: when
    unsure, a comparison is refused rather than confounded.

Beside the factors a label names, a configuration has *settings*: what its CNI's data path
does that no label option says, from the session's environment fingerprint
(:func:`recorded_settings`): what the CNI's agents reported while it ran
(``datapath_settings``, e.g. Cilium's host routing and masquerading) and otherwise what its
installer values asked (``cni_values``, through ``CniDriver.datapath_settings``). Two
configurations of one CNI compared on one factor must share every setting besides that
factor's own (:func:`differing_settings`); else their contrast is "not compared: differs in
masquerade (bpf vs iptables)". Settings are not factors between CNIs: how each CNI builds
its data path is what a comparison of CNIs compares.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cnibench.errors import ConfigError

__all__ = [
    "CONTROL_VALUES",
    "FACTOR_SETTINGS",
    "GATEWAY_SCENARIOS",
    "IMPLEMENTATION_VALUE",
    "INSTRUMENT_FACTOR",
    "INSTRUMENT_WORDS",
    "SERVICE_PROXY_FACTOR",
    "Configuration",
    "RecordedSettings",
    "configuration",
    "differing_factors",
    "differing_settings",
    "factor_words",
    "instrumented",
    "recorded_implementation",
    "recorded_settings",
    "settings_words",
]

INSTRUMENT_FACTOR = "napi"
"""The factor whose non-default value (``threaded``) is cnibench's per-node CPU instrument."""

INSTRUMENTED_VALUE = "threaded"
""":data:`INSTRUMENT_FACTOR`'s value that instruments a configuration."""

INSTRUMENT_WORDS = (
    "each node receives packets in kernel threads of its own, so that its CPU can be counted"
    " per node"
)
"""What ``napi=threaded`` does, in the words of a reader who never set it (the report's
lines and legends say this, not "napi" or "instrument" alone)."""

SERVICE_PROXY_FACTOR = "service proxy"
"""The factor naming what serves Services (kube-proxy's mode, or a CNI's own proxy)."""

FACTOR_SETTINGS: Mapping[str, frozenset[str]] = {
    SERVICE_PROXY_FACTOR: frozenset({"service proxy", "kube-proxy replacement"}),
}
"""The settings in which a factor itself shows (Cilium's reported kube-proxy replacement is
its service proxy): no second difference beside that factor."""

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
    settings:
        The CNI's data-path settings no label option names, as recorded
        (:func:`recorded_settings`), sorted by name; ``()`` when nothing was recorded.
    """

    label: str
    name: str
    factors: tuple[tuple[str, str], ...]
    settings: tuple[tuple[str, str], ...] = ()

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


def configuration(
    label: str,
    *,
    backend: str,
    options: Mapping[str, str] | str,
    settings: Mapping[str, str] | None = None,
) -> Configuration:
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
    settings:
        The configuration's recorded data-path settings (:func:`recorded_settings`).

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
    return Configuration(
        label, name, tuple(sorted(factors.items())), tuple(sorted((settings or {}).items()))
    )


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


def differing_settings(a: Configuration, b: Configuration, *, factor: str) -> list[str]:
    """The settings (:attr:`Configuration.settings`) both configurations recorded with
    different values, besides ``factor``'s own (:data:`FACTOR_SETTINGS`, and a setting the
    factor's value names, as ``features`` ``egress-gateway`` names ``egress gateway``): what
    else a contrast of ``factor`` between ``a`` and ``b`` would change. A setting only one
    side recorded is not counted (nothing says it differs). ``factor`` ``""``: every
    setting (two configurations compared as equal in every factor)."""
    left, right = dict(a.settings), dict(b.settings)
    named = {
        word.strip().replace("-", " ")
        for value in (a.factor(factor), b.factor(factor))
        for word in value.split(",")
    }
    own = FACTOR_SETTINGS.get(factor, frozenset()) | named
    return [
        key for key in sorted(set(left) & set(right)) if key not in own and left[key] != right[key]
    ]


def settings_words(keys: Sequence[str], a: Configuration, b: Configuration) -> str:
    """``"masquerade (bpf vs iptables), egress gateway (on vs off)"``: ``a``'s value first."""
    left, right = dict(a.settings), dict(b.settings)
    return ", ".join(f"{key} ({left[key]} vs {right[key]})" for key in keys)


@dataclass(frozen=True)
class RecordedSettings:
    """One configuration's data-path settings from its environment fingerprints.

    Attributes
    ----------
    settings:
        Each setting's value: what the cluster reported, else what was asked; where the
        fingerprints of several sessions disagree, their values joined (``"bpf or
        iptables"``), which equals no single value.
    mismatches:
        What a cluster reported otherwise than asked, in words (``"masquerade: bpf reported,
        iptables asked"``), once each.
    """

    settings: Mapping[str, str]
    mismatches: tuple[str, ...] = ()


def _json_mapping(text: object) -> dict[str, object]:
    if isinstance(text, Mapping):
        return {str(k): v for k, v in text.items()}
    if not isinstance(text, str) or not text:
        return {}
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return {str(k): v for k, v in loaded.items()} if isinstance(loaded, dict) else {}


def _asked_settings(name: str, values: Mapping[str, object]) -> dict[str, str]:
    # The CNI's driver reads its own installer values (imported only for Kubernetes
    # fingerprints, as _service_proxy is).
    from cnibench.backends.kube.cnis import DRIVERS

    driver = DRIVERS.get(name)
    return {} if driver is None else dict(driver.datapath_settings(values))


def recorded_settings(
    name: str,
    *,
    service_proxy: str,
    fingerprints: Sequence[Mapping[str, object]],
) -> RecordedSettings:
    """A configuration's data-path settings from the environment fingerprints of its sessions.

    Parameters
    ----------
    name:
        The CNI, e.g. ``cilium``.
    service_proxy:
        The service proxy its label asks for (its ``service proxy`` factor; ``""`` on the lab).
    fingerprints:
        Rows of :func:`cnibench.results.load_environments` of its sessions: ``backend``,
        ``cni_values`` (asked) and ``datapath_settings`` (reported), each JSON text or a
        mapping.

    Returns
    -------
    RecordedSettings
        The settings (reported, else asked) and what was reported otherwise than asked (the
        service proxy included). Lab fingerprints hold none.
    """
    seen: dict[str, set[str]] = {}
    mismatches: list[str] = []
    for row in fingerprints:
        if str(row.get("backend", "")) != "kube":
            continue
        asked = _asked_settings(name, _json_mapping(row.get("cni_values")))
        if service_proxy:
            asked.setdefault("service proxy", service_proxy)
        reported = {str(k): str(v) for k, v in _json_mapping(row.get("datapath_settings")).items()}
        for key, value in reported.items():
            if key in asked and asked[key] != value:
                words = f"{key}: {value} reported, {asked[key]} asked"
                if words not in mismatches:
                    mismatches.append(words)
        for key, value in {**asked, **reported}.items():
            seen.setdefault(key, set()).add(value)
    settings = {key: " or ".join(sorted(values)) for key, values in sorted(seen.items())}
    return RecordedSettings(settings, tuple(mismatches))


IMPLEMENTATION_VALUE = "wireguard_implementation"
"""The installer value in which the lab records what ran its WireGuard (``"kernel"`` or
``"wireguard-go"``; absent without encryption and in fingerprints written before it)."""


def recorded_implementation(fingerprints: Sequence[Mapping[str, object]]) -> str:
    """What ran a condition's encryption, as the environment fingerprints of its sessions
    recorded it (the lab's ``cni_values``, :data:`IMPLEMENTATION_VALUE`).

    Parameters
    ----------
    fingerprints:
        Rows of :func:`cnibench.results.load_environments` of the condition's records.

    Returns
    -------
    str
        ``"kernel"`` or ``"wireguard-go"`` where every fingerprint says the same; the ones
        they name joined by ``" or "`` where they differ (``"kernel or wireguard-go"``);
        ``""`` where any of them names none (no encryption, a Kubernetes cluster, or a
        fingerprint written before the lab recorded it) or there is none.
    """
    named = [_json_mapping(row.get("cni_values")).get(IMPLEMENTATION_VALUE) for row in fingerprints]
    if not named or not all(isinstance(value, str) and value for value in named):
        return ""
    return " or ".join(sorted({str(value) for value in named}))
