"""Prometheus configuration text for cnibench's own scrapers (lab backend, tests).

Only the text is built here; starting Prometheus belongs to the backends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from cnibench.errors import ConfigError
from cnibench.metrics.queries import validate_duration

__all__ = ["prometheus_config"]

_TARGET_RE = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]{1,5})$")
_JOB_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")


def _check_target(job: str, target: str) -> None:
    match = _TARGET_RE.match(target)
    if match is None or not 0 < int(match.group("port")) < 65536:
        raise ConfigError(f"invalid scrape target {target!r} in job {job!r}: expected host:port")


def prometheus_config(
    targets: Mapping[str, Sequence[str]],
    *,
    scrape_interval: str = "1s",
    instance_names: Mapping[str, str] | None = None,
) -> str:
    """Prometheus YAML configuration scraping ``targets`` every ``scrape_interval``.

    Parameters
    ----------
    targets:
        Job name to ``host:port`` targets, e.g. ``{"node": ["127.0.0.1:9100"]}``.
    scrape_interval:
        Prometheus duration between scrapes (default ``"1s"``, what the 5 s ``irate`` window
        of :mod:`cnibench.metrics.queries` assumes). The scrape timeout is set equal to it,
        since Prometheus refuses a timeout longer than the interval.
    instance_names:
        Optional ``host:port`` to a readable ``instance`` label (e.g. the lab node name), so
        that per-instance results are keyed by node name instead of address.

    Returns
    -------
    str
        YAML text for ``prometheus --config.file``.

    Raises
    ------
    ConfigError
        If there is no job, a job has no targets, a job name or target is malformed,
        ``scrape_interval`` is not a duration, or ``instance_names`` names a target that is
        not scraped.
    """
    validate_duration(scrape_interval, what="scrape_interval")
    if not targets:
        raise ConfigError("prometheus_config needs at least one scrape job")
    for job, job_targets in targets.items():
        if not job_targets:
            raise ConfigError(f"Prometheus job {job!r} has no scrape targets")
    names = dict(instance_names or {})
    scraped = {target for job_targets in targets.values() for target in job_targets}
    unknown = sorted(set(names) - scraped)
    if unknown:
        raise ConfigError(f"instance_names names targets that are not scraped: {unknown}")
    scrape_configs: list[dict[str, Any]] = []
    for job, job_targets in targets.items():
        if not _JOB_RE.match(job):
            raise ConfigError(f"invalid Prometheus job name {job!r}")
        for target in job_targets:
            _check_target(job, target)
        static_configs: list[dict[str, Any]] = []
        plain = [target for target in job_targets if target not in names]
        if plain:
            static_configs.append({"targets": plain})
        static_configs.extend(
            {"targets": [target], "labels": {"instance": names[target]}}
            for target in job_targets
            if target in names
        )
        scrape_configs.append({"job_name": job, "static_configs": static_configs})
    config = {
        "global": {
            "scrape_interval": scrape_interval,
            "scrape_timeout": scrape_interval,
            "evaluation_interval": scrape_interval,
        },
        "scrape_configs": scrape_configs,
    }
    return yaml.safe_dump(config, sort_keys=False)
