"""Scenario parameters shared by ``cnibench run`` and the pytest plugin.

``--weights v1=60,v2=40 --users 1,10,100,1000 --rules 0,100 --clients 1,50 --engine nftables-set
--load-engine locust --pairs 4`` are parsed here, once, into a frozen :class:`ScenarioOptions`
that the baseline, split, policy and l7 scenarios take in their constructors. Every parser
raises a one-line :class:`~cnibench.errors.ConfigError` naming the bad value and what is
allowed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from cnibench.backends.base import MAX_OTHER_SERVICES, ServiceProxy
from cnibench.errors import ConfigError
from cnibench.policy import MAX_EXTRA_RULES, PolicyEngine
from cnibench.tools.locust_dist import MAX_WORKERS as MAX_LOAD_WORKERS
from cnibench.tools.locust_runner import ENGINES as LOAD_ENGINES

__all__ = [
    "DEFAULT_OPTIONS",
    "DEFAULT_POLICY_ENGINES",
    "INTERLEAVED_SERVICES_MAX",
    "MAX_CLIENTS",
    "MAX_PAIRS",
    "ScenarioOptions",
    "parse_engines",
    "parse_int_list",
    "parse_load_engine",
    "parse_load_workers",
    "parse_pairs",
    "parse_proxies",
    "parse_scenario_options",
    "parse_targets",
    "parse_weights",
]

TARGETS = ("pod", "service", "nodeport")
"""What the baseline's client connects to: the pod's address, a Service's virtual IP, or a
NodePort on the server's node."""

MAX_CLIENTS = 500
MAX_PAIRS = 64
"""Most client/server pairs ``--pairs`` runs at once (128 pods; beyond that a node's pod limit,
110 by default on Kubernetes, is the bound, not the datapath)."""
MAX_USERS = 5000
INTERLEAVED_SERVICES_MAX = 100
"""Most further Services a condition may have and still be set up again in every round of an
interleaved session (seconds on kind and the lab); beyond it a set-up creates and deletes
thousands of objects (1000 and 5000 took minutes each way on kind, docs/findings.md), so such
a condition runs all its repetitions on one set-up
(:meth:`~cnibench.scenarios.baseline.BaselineScenario.sequential_reason`)."""
DEFAULT_LOAD_WORKERS = 2
"""Workers of locust's own distribution in pods when ``--load-workers`` is not given."""
_BACKEND_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
_DEFAULT_WEIGHTS: tuple[Mapping[str, int], ...] = tuple(
    MappingProxyType({"v1": a, "v2": b})
    for a, b in ((60, 40), (95, 5), (75, 25), (50, 50), (100, 0))
)


@dataclass(frozen=True)
class ScenarioOptions:
    """Parameter grids of the split, policy and l7 scenarios.

    Attributes
    ----------
    weights:
        Split weight sets, each backend name to an integer weight (seed 000: 60/40 ...).
    users:
        Virtual users of the split scenario.
    rules:
        Non-matching policy rules placed before the matching one.
    clients:
        Concurrent clients of the policy scenario.
    engines:
        Policy engines (``--engine``), or ``None`` when not given: then
        :data:`DEFAULT_POLICY_ENGINES` on a backend that offers engines (the lab), and none
        where the CNI enforces a policy with its own datapath (every Kubernetes CNI), whose
        policy conditions name no engine. Given for such a backend, it is refused
        (:meth:`cnibench.scenarios.policy.PolicyScenario.on_backend`).
    targets:
        Baseline targets (:data:`TARGETS`); ``pod`` only by default.
    proxies:
        Service proxies for the ``service`` and ``nodeport`` targets (the lab's two by
        default; a Kubernetes cluster runs the conditions of the proxy it has).
    services:
        Further Services in the proxy's tables beside the one measured (seed 001's linear
        iptables walk against a map lookup).
    load_engine:
        What drives the split scenario's virtual users
        (:data:`cnibench.tools.locust_runner.ENGINES`): cnibench's own ``epoll`` client (the
        default) or ``locust``. Each split run records it as its ``load_engine`` parameter.
    load_workers:
        ``--load-workers``: workers of locust's own master/worker distribution, which runs in
        client pods on a backend that says so (:attr:`cnibench.backends.base.Backend.
        load_in_pods`, Kubernetes), each in a pod of its own; ``None`` (not given):
        :data:`DEFAULT_LOAD_WORKERS` there. Only with ``load_engine`` ``locust`` (refused with
        ``epoll``), and refused on a backend that keeps the load on this host (the lab).
    pairs:
        ``--pairs``: client/server pairs the baseline's iperf3 and sockperf conditions run at
        once (1 to :data:`MAX_PAIRS`), each pair's values and their aggregate recorded, and a
        latency probe under the iperf3 streams (:mod:`cnibench.scenarios.pairs`); such a
        condition has a ``pairs`` parameter. ``None`` (not given): one client, no per-pair
        records, conditions and results as before the option. Only the baseline takes more
        than one pair (:meth:`cnibench.scenarios.base.Scenario.runs_pairs`).
    """

    weights: tuple[Mapping[str, int], ...] = field(default=_DEFAULT_WEIGHTS)
    users: tuple[int, ...] = (1, 10, 100, 1000)
    rules: tuple[int, ...] = (0, 1000)
    clients: tuple[int, ...] = (1, 50)
    engines: tuple[PolicyEngine, ...] | None = None
    targets: tuple[str, ...] = ("pod",)
    proxies: tuple[ServiceProxy, ...] = (ServiceProxy.IPTABLES, ServiceProxy.NFTABLES)
    services: tuple[int, ...] = (0,)
    load_engine: str = LOAD_ENGINES[0]
    load_workers: int | None = None
    pairs: int | None = None


DEFAULT_POLICY_ENGINES = (PolicyEngine.IPTABLES, PolicyEngine.NFTABLES_SET)
"""The policy engines of a backend that offers engines when ``--engine`` is not given: a
linear rule walk and a set lookup, the two ends of seed 003's comparison."""

DEFAULT_OPTIONS = ScenarioOptions()
"""The defaults: small enough for the ``quick`` profile; full grids come from the options."""


def parse_weights(text: str) -> Mapping[str, int]:
    """``"v1=60,v2=40"`` -> ``{"v1": 60, "v2": 40}`` (read-only).

    Raises
    ------
    ConfigError
        Bad syntax, a bad or repeated backend name, a negative or non-integer weight, fewer
        than two backends, or all weights zero.
    """
    weights: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"invalid weights {text!r}: use name=weight pairs, e.g. v1=60,v2=40")
        if not _BACKEND_RE.match(name):
            raise ConfigError(
                f"invalid backend name {name!r} in weights: use lowercase letters, digits, '-'"
            )
        if name in weights:
            raise ConfigError(f"backend {name!r} appears twice in weights {text!r}")
        try:
            weight = int(value.strip())
        except ValueError:
            raise ConfigError(
                f"weight of {name!r} must be a whole number >= 0, got {value.strip()!r}"
            ) from None
        if weight < 0:
            raise ConfigError(f"weight of {name!r} must be >= 0, got {weight}")
        weights[name] = weight
    if len(weights) < 2:
        raise ConfigError(f"weights {text!r} name one backend: a split needs at least two")
    if not any(weights.values()):
        raise ConfigError(f"weights {text!r} are all zero: at least one must be positive")
    return MappingProxyType(weights)


def parse_int_list(text: str, *, name: str, low: int, high: int) -> tuple[int, ...]:
    """``"1,10,100"`` -> ``(1, 10, 100)``, each within ``low..high`` (duplicates dropped).

    Raises
    ------
    ConfigError
        An item that is not a whole number or lies outside ``low..high``.
    """
    values: list[int] = []
    for item in text.split(","):
        item = item.strip()
        try:
            value = int(item)
        except ValueError:
            raise ConfigError(
                f"--{name}: {item!r} is not a whole number (use e.g. {low},{high})"
            ) from None
        if not low <= value <= high:
            raise ConfigError(f"--{name}: {value} is outside {low}..{high}")
        if value not in values:
            values.append(value)
    return tuple(values)


def _choices(text: str, choices: Sequence[str], what: str) -> tuple[str, ...]:
    """A comma-separated list of ``choices`` (``all``: every one), in the order given, each once.

    Raises
    ------
    ConfigError
        A name that is not one of ``choices``, naming ``what`` it should have been.
    """
    if text.strip() == "all":
        return tuple(choices)
    chosen: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if item not in choices:
            raise ConfigError(f"unknown {what} {item!r}: choose {', '.join(choices)} or all")
        if item not in chosen:
            chosen.append(item)
    return tuple(chosen)


def parse_engines(text: str) -> tuple[PolicyEngine, ...]:
    """``"iptables,nftables-set"`` -> engines; ``"all"`` gives every engine.

    Raises
    ------
    ConfigError
        An unknown engine name.
    """
    names = _choices(text, [engine.value for engine in PolicyEngine], "policy engine")
    return tuple(PolicyEngine(name) for name in names)


def parse_load_engine(text: str) -> str:
    """``"locust"`` -> ``"locust"``: one of :data:`cnibench.tools.locust_runner.ENGINES`.

    Raises
    ------
    ConfigError
        Any other name.
    """
    name = text.strip()
    if name not in LOAD_ENGINES:
        raise ConfigError(f"unknown --load-engine {name!r}: choose {' or '.join(LOAD_ENGINES)}")
    return name


def _parse_count(text: str, *, name: str, high: int) -> int:
    """``"4"`` -> 4: one whole number from 1 to ``high`` for option ``--<name>``.

    Raises
    ------
    ConfigError
        Anything else, in one line.
    """
    item = text.strip()
    try:
        value = int(item)
    except ValueError:
        raise ConfigError(f"--{name}: {item!r} is not a whole number (use 1 to {high})") from None
    if not 1 <= value <= high:
        raise ConfigError(f"--{name}: {value} is outside 1..{high}")
    return value


def parse_load_workers(text: str) -> int:
    """``"4"`` -> 4: the ``--load-workers`` value, a whole number from 1 to
    :data:`cnibench.tools.locust_dist.MAX_WORKERS`.

    Raises
    ------
    ConfigError
        Anything else, in one line.
    """
    return _parse_count(text, name="load-workers", high=MAX_LOAD_WORKERS)


def parse_pairs(text: str) -> int:
    """``"4"`` -> 4: the ``--pairs`` value, a whole number from 1 to :data:`MAX_PAIRS`.

    Raises
    ------
    ConfigError
        Anything else, in one line.
    """
    return _parse_count(text, name="pairs", high=MAX_PAIRS)


def parse_targets(text: str) -> tuple[str, ...]:
    """``"pod,service"`` -> ``("pod", "service")`` (``all``: every target)."""
    return _choices(text, TARGETS, "target")


def parse_proxies(text: str) -> tuple[ServiceProxy, ...]:
    """``"iptables,nftables"`` -> Service proxies (``all``: every one; the lab offers iptables
    and nftables, a Kubernetes cluster the one it runs)."""
    names = _choices(text, [proxy.value for proxy in ServiceProxy], "service proxy")
    return tuple(ServiceProxy(name) for name in names)


def parse_scenario_options(
    *,
    weights: list[str] | None = None,
    users: str | None = None,
    rules: str | None = None,
    clients: str | None = None,
    engine: str | None = None,
    target: str | None = None,
    proxy: str | None = None,
    services: str | None = None,
    load_engine: str | None = None,
    pairs: str | int | None = None,
    load_workers: str | int | None = None,
) -> ScenarioOptions:
    """Options from command-line strings; ``None`` keeps the default of that field.

    Parameters
    ----------
    weights:
        One ``--weights`` value per weight set (the option may repeat).
    users, rules, clients, engine, target, proxy, services:
        Comma-separated ``--users`` / ``--rules`` / ``--clients`` / ``--engine`` /
        ``--target`` / ``--proxy`` / ``--services`` values.
    load_engine:
        The ``--load-engine`` value.
    pairs:
        The ``--pairs`` value.
    load_workers:
        The ``--load-workers`` value.

    Raises
    ------
    ConfigError
        From the individual parsers, ``--pairs`` with a Service target (each pair would
        need its own Service; ``--pairs`` measures pod to pod), and ``--load-workers`` without
        ``--load-engine locust`` (the epoll engine has no workers).
    """
    options = DEFAULT_OPTIONS
    chosen_pairs = None if pairs is None else parse_pairs(str(pairs))
    chosen_targets = parse_targets(target) if target else options.targets
    if chosen_pairs is not None and chosen_targets != ("pod",):
        raise ConfigError(
            f"--pairs {chosen_pairs} measures pod to pod: it cannot be combined with --target"
            f" {','.join(chosen_targets)}"
        )
    chosen_engine = parse_load_engine(load_engine) if load_engine else options.load_engine
    chosen_workers = None if load_workers is None else parse_load_workers(str(load_workers))
    if chosen_workers is not None and chosen_engine != "locust":
        raise ConfigError(
            f"--load-workers {chosen_workers} needs --load-engine locust: the {chosen_engine}"
            " engine runs on this host, without workers"
        )
    return ScenarioOptions(
        weights=tuple(parse_weights(w) for w in weights) if weights else options.weights,
        users=parse_int_list(users, name="users", low=1, high=MAX_USERS)
        if users
        else options.users,
        rules=parse_int_list(rules, name="rules", low=0, high=MAX_EXTRA_RULES)
        if rules
        else options.rules,
        clients=parse_int_list(clients, name="clients", low=1, high=MAX_CLIENTS)
        if clients
        else options.clients,
        engines=parse_engines(engine) if engine else options.engines,
        targets=chosen_targets,
        proxies=parse_proxies(proxy) if proxy else options.proxies,
        services=parse_int_list(services, name="services", low=0, high=MAX_OTHER_SERVICES)
        if services
        else options.services,
        load_engine=chosen_engine,
        load_workers=chosen_workers,
        pairs=chosen_pairs,
    )
