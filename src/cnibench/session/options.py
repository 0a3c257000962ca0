"""The options of a session, one table for ``cnibench run`` and the pytest plugin, checked once
into a :class:`~cnibench.session.config.SessionConfig` (:func:`session_config`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cnibench.backends.base import NodePins
from cnibench.errors import ConfigError
from cnibench.scenarios.options import parse_scenario_options
from cnibench.scenarios.profiles import DEFAULT_MAX_RUNS, parse_duration, profile_named
from cnibench.session.config import (
    DEFAULT_PROFILE,
    LAB_DATAPATHS,
    ClusterChoice,
    CniRequest,
    SessionConfig,
)


def add_session_options(add: Callable[..., object]) -> None:
    """The options of a session, one table for ``cnibench run`` (argparse) and the pytest
    plugin (its option group): same options, defaults and help; the plugin names each but
    ``--cluster`` and ``--cni`` ``--cnibench-NAME`` (:func:`cnibench.plugin.plugin_option`).
    Values stay text here and are checked once, by :func:`session_config`, so both front ends
    give the same one-line errors (the plugin's in its own option names)."""
    add(
        "--cluster",
        default="auto",
        metavar="KIND",
        help="where to benchmark: auto (kind when a container engine answers, else the lab),"
        " lab, kind, aks or existing (default: auto)",
    )
    add(
        "--cni",
        action="append",
        default=[],
        metavar="NAME[:FEATURE,...]",
        help=f"lab datapath ({', '.join(LAB_DATAPATHS)}) or Kubernetes CNI, with features and"
        " options, e.g. cilium:gateway-api or cilium:mode=kube-proxy (repeatable); default:"
        " the backend's",
    )
    add(
        "--profile",
        default=DEFAULT_PROFILE,
        metavar="NAME",
        help=f"smoke, quick, standard or paper (default: {DEFAULT_PROFILE})",
    )
    add("--runs", default=None, metavar="N", help="repetitions per condition (overrides it)")
    add(
        "--duration",
        default=None,
        metavar="TIME",
        help="length of each timed measurement, e.g. 30s or 12m (overrides the profile)",
    )
    add(
        "--precision",
        default=None,
        metavar="P",
        help="repeat runs until each contrast's 95%% interval is within ±P (e.g. 5%%) or"
        " --max-runs is reached; stops on width, never on significance",
    )
    add(
        "--until-decided",
        action="store_true",
        help="add interleaved rounds to the conditions whose contrasts are undecided (neither"
        " a cost nor the same within ±5%%), looking after the profile's runs, then at twice"
        " as many, up to --max-runs; each look is tested at 5%% over the number of looks",
    )
    add(
        "--budget",
        default=None,
        metavar="TIME",
        help="with --until-decided: time the session may take, e.g. 2h; no further rounds"
        " start that would end past it",
    )
    add(
        "--max-runs",
        default=None,
        metavar="N",
        help="most runs per condition --precision or --until-decided may take (default"
        f" {DEFAULT_MAX_RUNS})",
    )
    add(
        "--precision-on",
        default=None,
        metavar="METRIC,...",
        help="the metrics --precision judges, e.g. throughput (default: each scenario's"
        " primary metrics)",
    )
    add("--results-dir", default="results", metavar="DIR", help="default: results")
    add(
        "--nodes",
        default=None,
        metavar="ROLE=NODE,...",
        help="Kubernetes nodes for the roles client, server and egress-gw, e.g."
        " client=worker-1,server=worker-2 (default: nodes labelled cnibench.io/role=ROLE, else"
        " schedulable Ready workers chosen by cnibench; nothing is written to any node)",
    )
    add(
        "--image-registry",
        default=None,
        metavar="REGISTRY",
        help="pull cnibench's own images (tools, and with the offline set every pod image)"
        " from REGISTRY (HOST[:PORT][/PATH]) instead of loading them into kind; they are"
        " pushed there first from $DOCKER_HOST's engine when set (cnibench images push)",
    )
    add(
        "--keep-cluster",
        action="store_true",
        help="leave Kubernetes clusters running after the session",
    )
    add(
        "--recreate-cluster",
        action="store_true",
        help="do not reuse a cached Kubernetes cluster",
    )
    add(
        "--report",
        default=None,
        metavar="FILE",
        help="write a self-contained HTML report of this session's results at the end",
    )
    add(
        "--reference",
        default=None,
        metavar="CNI",
        help="CNI the end-of-session verdict (and --report) compares every other CNI with"
        " (default: the first --cni)",
    )
    add(
        "--all-metrics",
        action="store_true",
        help="--report draws every recorded metric, not only each scenario's primary metrics",
    )
    add_scenario_options(add)


SESSION_OPTIONS = (
    "cluster",
    "cni",
    "profile",
    "runs",
    "duration",
    "precision",
    "until_decided",
    "budget",
    "max_runs",
    "precision_on",
    "results_dir",
    "keep_cluster",
    "recreate_cluster",
    "nodes",
    "image_registry",
    "report",
    "reference",
    "all_metrics",
    "weights",
    "users",
    "rules",
    "clients",
    "engine",
    "target",
    "proxy",
    "services",
    "load_engine",
    "load_workers",
    "pairs",
)
"""Destination names of :func:`add_session_options`, the keys :func:`session_config` reads."""


def session_config(values: Mapping[str, Any]) -> SessionConfig:
    """A :class:`SessionConfig` from the options of :func:`add_session_options` (keys as
    argparse names them: ``results_dir``), every value checked here and only here.

    Raises
    ------
    cnibench.errors.ConfigError
        One line naming the option and the bad value.
    """
    cluster = ClusterChoice.parse(str(values["cluster"]))
    runs = _integer("--runs", values.get("runs"))
    duration = values.get("duration")
    profile = profile_named(str(values["profile"])).with_overrides(
        runs=runs, duration=parse_duration(str(duration)) if duration is not None else None
    )
    options = parse_scenario_options(
        weights=values.get("weights"),
        users=values.get("users"),
        rules=values.get("rules"),
        clients=values.get("clients"),
        engine=values.get("engine"),
        target=values.get("target"),
        proxy=values.get("proxy"),
        services=values.get("services"),
        load_engine=values.get("load_engine"),
        pairs=values.get("pairs"),
        load_workers=values.get("load_workers"),
    )
    precision = _precision(values.get("precision"))
    until_decided = bool(values.get("until_decided"))
    if until_decided and precision is not None:
        raise ConfigError(
            "--until-decided and --precision both choose when a condition stops: give one"
        )
    budget_text = values.get("budget")
    if budget_text is not None and not until_decided:
        raise ConfigError("--budget needs --until-decided")
    budget = None if budget_text is None else parse_duration(str(budget_text))
    if budget is not None and budget < 60.0:
        raise ConfigError(f"--budget {budget_text}: give at least 1m, the time of a round or two")
    max_runs = _integer("--max-runs", values.get("max_runs"))
    if max_runs is not None and max_runs < profile.runs:
        raise ConfigError(
            f"--max-runs {max_runs} is below the {profile.runs} runs per condition of the profile"
        )
    return SessionConfig(
        cluster=cluster,
        cnis=CniRequest.parse(values.get("cni") or ()),
        profile=profile,
        results_dir=Path(values.get("results_dir") or "results"),
        keep_cluster=bool(values.get("keep_cluster")),
        recreate_cluster=bool(values.get("recreate_cluster")),
        scenario_options=options,
        precision=precision,
        max_runs=DEFAULT_MAX_RUNS if max_runs is None else max_runs,
        precision_metrics=_precision_metrics(values.get("precision_on"), precision),
        until_decided=until_decided,
        budget=budget,
        report=_report_path(values.get("report")),
        reference=None if values.get("reference") is None else str(values["reference"]),
        all_metrics=bool(values.get("all_metrics")),
        nodes=NodePins.parse(values.get("nodes")),
        image_registry=str(values.get("image_registry") or ""),
    )


def _report_path(text: object) -> Path | None:
    """``--report`` as a path a file can be written to, checked before anything is measured:
    not a directory, and its nearest existing parent a writable directory (the report creates
    the missing ones)."""
    if not text:
        return None
    path = Path(str(text))
    if path.is_dir():
        raise ConfigError(f"--report {path} is a directory: name a file, e.g. {path}/report.html")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"--report {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"--report {path}: {parent} is not writable")
    return path


def _precision_metrics(text: object, precision: float | None) -> tuple[str, ...]:
    """``--precision-on`` as metric names; it means nothing without ``--precision``."""
    if text is None:
        return ()
    if precision is None:
        raise ConfigError("--precision-on needs --precision")
    names = tuple(name.strip() for name in str(text).split(",") if name.strip())
    if not names:
        raise ConfigError(f"--precision-on {str(text)!r}: name at least one metric")
    return names


def _precision(text: object) -> float | None:
    """``--precision`` as a fraction in (0, 1): ``5%`` or ``0.05``."""
    if text is None:
        return None
    from cnibench.report.compare import parse_threshold

    try:
        value = parse_threshold(str(text))
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("threshold", "--precision")) from None
    if not 0.0 < value < 1.0:
        raise ConfigError(f"--precision {text!r}: it must be above 0 and below 100%")
    return value


def _integer(option: str, text: object) -> int | None:
    """``text`` as an int (its range is checked where it is used, e.g.
    :meth:`Profile.with_overrides` for ``--runs``)."""
    if text is None:
        return None
    try:
        return int(str(text))
    except ValueError:
        raise ConfigError(f"{option}: {str(text)!r} is not an integer") from None


def add_scenario_options(add: Callable[..., object]) -> None:
    """Scenario parameters shared by ``cnibench run`` and the pytest plugin."""
    add(
        "--weights",
        action="append",
        default=None,
        metavar="B=W,...",
        help="split weights, e.g. v1=60,v2=40 (repeatable: one weight set each)",
    )
    add("--users", default=None, metavar="N,...", help="split virtual users, e.g. 1,10,100,1000")
    add("--rules", default=None, metavar="N,...", help="policy rule counts, e.g. 0,100,500,1000")
    add("--clients", default=None, metavar="N,...", help="policy concurrent clients, e.g. 1,50")
    add(
        "--engine",
        default=None,
        metavar="NAME,...",
        help="the lab's policy engines: iptables, nftables, nftables-set or all (default"
        " iptables,nftables-set); refused on Kubernetes, where each CNI enforces with its own",
    )
    add(
        "--target",
        default=None,
        metavar="NAME,...",
        help="baseline targets: pod (default), service (a virtual IP), nodeport, or all",
    )
    add(
        "--proxy",
        default=None,
        metavar="NAME,...",
        help="Service proxies for the service and nodeport targets: iptables, nftables (the"
        " lab's two, the default), ebpf (a CNI's kube-proxy replacement) or all; a Kubernetes"
        " cluster runs the one it has and skips the others, naming it",
    )
    add(
        "--services",
        default=None,
        metavar="N,...",
        help="further Services in the proxy's tables, e.g. 0,1000,5000 (default: 0)",
    )
    add(
        "--load-engine",
        default=None,
        metavar="NAME",
        help="what drives the split scenario's users: epoll (cnibench's own, default) or locust"
        " (on Kubernetes: locust's own master and workers in client pods)",
    )
    add(
        "--load-workers",
        default=None,
        metavar="N",
        help="with --load-engine locust on Kubernetes: locust workers, one client pod each"
        " (1-64, default 2); refused with epoll and on the lab, whose locust runs on this host",
    )
    add(
        "--pairs",
        default=None,
        metavar="N",
        help="run the baseline's iperf3 and sockperf conditions with N client/server pairs at"
        " once (1-64; pod target only): each pair's values, their aggregate (the run's value)"
        " and iperf3's latency_under_load_* are recorded; other scenarios refuse N > 1",
    )
