"""Prometheus access: range queries over a run's time window, reduced to one value per node.

Parsing and reducing Prometheus answers are pure functions (:func:`parse_matrix`,
:func:`matrix_from_response`, :func:`series_by_instance`, :func:`reduce_series`), tested on
captured responses in ``fixtures/prometheus``. :class:`MetricsClient` is the only part doing
I/O, through ``prometheus-api-client``; every failure it meets (connection refused, HTTP error,
bad query, empty answer) becomes one :class:`~cnibench.errors.MetricsError` whose one-line message
names the query and the Prometheus URL.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypedDict

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from cnibench.errors import ConfigError, MetricsError
from cnibench.metrics.queries import (
    CPU_PERCENT,
    DEFAULT_DEVICE_REGEX,
    DEFAULT_WINDOW,
    RAM_MB,
    RECEIVE_RATE_BITS,
    NamedQuery,
    label_selector,
    validate_duration,
)
from cnibench.records import Measurement
from cnibench.waiting import Deadline, wait_for

__all__ = [
    "REDUCERS",
    "RUN_METRICS",
    "MatrixResponse",
    "MatrixSeries",
    "MetricsClient",
    "MetricsSettings",
    "Reducer",
    "Series",
    "matrix_from_response",
    "parse_matrix",
    "reduce_series",
    "series_by_instance",
]

Reducer = Literal["mean", "median", "min", "max", "last"]
"""How a window of samples becomes one value."""

REDUCERS: tuple[Reducer, ...] = ("mean", "median", "min", "max", "last")

RUN_METRICS: tuple[tuple[str, NamedQuery], ...] = (
    ("cpu", CPU_PERCENT),
    ("ram", RAM_MB),
    ("receive_rate", RECEIVE_RATE_BITS),
)
"""Metric base name and query of what :meth:`MetricsClient.run_metrics` measures per node."""

_MESSAGE_LIMIT = 300


class MatrixSeries(TypedDict):
    """One series of a Prometheus ``matrix`` result (raw JSON)."""

    metric: dict[str, str]
    values: list[list[float | str]]


class _MatrixData(TypedDict):
    resultType: str
    result: list[MatrixSeries]


class MatrixResponse(TypedDict, total=False):
    """Body of ``/api/v1/query_range`` (raw JSON)."""

    status: str
    data: _MatrixData
    errorType: str
    error: str
    warnings: list[str]


@dataclass(frozen=True)
class Series:
    """Samples of one Prometheus series.

    Attributes
    ----------
    labels:
        The series' labels (``instance``, ``job``, ...).
    timestamps:
        Sample times, Unix seconds, increasing.
    values:
        Sample values in the query's unit; ``nan`` where Prometheus answered ``NaN``.
    """

    labels: Mapping[str, str]
    timestamps: tuple[float, ...]
    values: tuple[float, ...]

    @property
    def instance(self) -> str:
        """The ``instance`` label, ``""`` when the query aggregated it away."""
        return self.labels.get("instance", "")


@dataclass(frozen=True)
class MetricsSettings:
    """How :class:`MetricsClient` builds and sends its queries.

    Attributes
    ----------
    window:
        ``irate`` look-back window, a Prometheus duration; at least two scrape intervals
        (see :mod:`cnibench.metrics.queries` for why the default is ``"5s"``).
    device_regex:
        RE2 regex of the interfaces whose received bytes count (``device`` label).
    step:
        Range-query resolution in seconds; the scrape interval is the natural choice.
    retries:
        How often a failed HTTP request is retried (connection errors, 502/503/504).
    """

    window: str = DEFAULT_WINDOW
    device_regex: str = DEFAULT_DEVICE_REGEX
    step: float = 1.0
    retries: int = 2

    def __post_init__(self) -> None:
        validate_duration(self.window, what="irate window")
        if not self.step > 0 or math.isinf(self.step):
            raise ConfigError(f"invalid query step {self.step!r}: expected seconds > 0")
        if self.retries < 0:
            raise ConfigError(f"invalid retries {self.retries!r}: expected >= 0")


def _one_line(text: object) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _MESSAGE_LIMIT else line[: _MESSAGE_LIMIT - 3] + "..."


def parse_matrix(result: Sequence[Mapping[str, Any]]) -> list[Series]:
    """Series from the ``data.result`` list of a ``matrix`` answer.

    Parameters
    ----------
    result:
        The list of ``{"metric": {...}, "values": [[time, "value"], ...]}`` items, what
        ``PrometheusConnect.custom_query_range`` returns.

    Returns
    -------
    list of Series
        In the order Prometheus sent them.

    Raises
    ------
    MetricsError
        If an item does not have that shape or a value is not a number.
    """
    parsed: list[Series] = []
    for index, item in enumerate(result):
        try:
            labels = {str(key): str(value) for key, value in item["metric"].items()}
            pairs = [(float(stamp), float(value)) for stamp, value in item["values"]]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MetricsError(
                f"malformed Prometheus matrix series #{index}: {_one_line(item)}"
            ) from exc
        parsed.append(
            Series(
                labels=labels,
                timestamps=tuple(stamp for stamp, _ in pairs),
                values=tuple(value for _, value in pairs),
            )
        )
    return parsed


def matrix_from_response(body: Mapping[str, Any]) -> list[Series]:
    """Series from a whole ``/api/v1/query_range`` response body.

    Parameters
    ----------
    body:
        The decoded JSON (:class:`MatrixResponse`).

    Returns
    -------
    list of Series
        Possibly empty (a query that matched nothing).

    Raises
    ------
    MetricsError
        If the body reports an error or is not a ``matrix`` result.
    """
    status = body.get("status")
    if status != "success":
        error = body.get("error", "no error message")
        raise MetricsError(
            f"Prometheus answered status {status!r} ({body.get('errorType', '?')}): "
            f"{_one_line(error)}"
        )
    data = body.get("data")
    if not isinstance(data, Mapping) or data.get("resultType") != "matrix":
        kind = data.get("resultType") if isinstance(data, Mapping) else None
        raise MetricsError(f"expected a Prometheus matrix result, got resultType {kind!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise MetricsError("Prometheus matrix result has no 'result' list")
    return parse_matrix(result)


def series_by_instance(series: Sequence[Series]) -> dict[str, Series]:
    """Key series by their ``instance`` label.

    Parameters
    ----------
    series:
        Series of a query that yields at most one series per instance (aggregate with
        ``by (instance)`` otherwise).

    Returns
    -------
    dict
        Instance to series; a series without ``instance`` label is keyed ``""``.

    Raises
    ------
    MetricsError
        If two series share an instance, i.e. the query was not aggregated per instance.
    """
    keyed: dict[str, Series] = {}
    for item in series:
        if item.instance in keyed:
            raise MetricsError(
                f"query returned several series for instance {item.instance!r} "
                f"({dict(keyed[item.instance].labels)} and {dict(item.labels)}); "
                "aggregate it with 'by (instance)'"
            )
        keyed[item.instance] = item
    return keyed


def reduce_series(series: Series, reducer: Reducer = "mean") -> float:
    """One value for a window of samples.

    Parameters
    ----------
    series:
        The samples (in the query's unit).
    reducer:
        ``"mean"`` (default: the run's average, as seed 001 reports per run), ``"median"``,
        ``"min"``, ``"max"`` or ``"last"``. ``NaN`` samples are ignored.

    Returns
    -------
    float
        The reduced value, in the query's unit.

    Raises
    ------
    ConfigError
        If ``reducer`` is unknown.
    MetricsError
        If the series has no sample that is a number.
    """
    if reducer not in REDUCERS:
        raise ConfigError(f"unknown reducer {reducer!r}: expected one of {', '.join(REDUCERS)}")
    values = [value for value in series.values if not math.isnan(value)]
    if not values:
        raise MetricsError(
            f"series {dict(series.labels)} has no numeric sample in the window "
            f"({len(series.values)} NaN samples)"
        )
    if reducer == "mean":
        return statistics.fmean(values)
    if reducer == "median":
        return float(statistics.median(values))
    if reducer == "min":
        return min(values)
    if reducer == "max":
        return max(values)
    return values[-1]


def _as_datetime(value: datetime | float, what: str) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ConfigError(f"{what} {value.isoformat()} has no time zone: pass an aware time")
        return value
    if not math.isfinite(value):
        raise ConfigError(f"invalid {what} {value!r}: expected Unix seconds")
    return datetime.fromtimestamp(value, tz=UTC)


@dataclass(frozen=True)
class _Window:
    start: datetime
    end: datetime

    def describe(self) -> str:
        return f"{self.start.isoformat()}..{self.end.isoformat()}"


class MetricsClient:
    """Queries one Prometheus server over HTTP.

    Parameters
    ----------
    url:
        Base URL, e.g. ``"http://127.0.0.1:9090"`` (a port-forward for the in-cluster
        Prometheus).
    timeout:
        Timeout of each HTTP request, seconds.
    settings:
        Query window, interface regex, step and retries.

    Raises
    ------
    ConfigError
        If ``url`` is not an http(s) URL or ``timeout`` is not positive.

    Examples
    --------
    >>> client = MetricsClient("http://127.0.0.1:9090")  # doctest: +SKIP
    >>> client.run_metrics(run_start, run_end)  # doctest: +SKIP
    [Measurement(metric='cpu@10.0.0.1:9100', value=12.5, unit='%'), ...]
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        settings: MetricsSettings | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"invalid Prometheus URL {url!r}: expected http://host:port")
        if not timeout > 0:
            raise ConfigError(f"invalid Prometheus timeout {timeout!r}: expected seconds > 0")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.settings = settings or MetricsSettings()
        retry = Retry(
            total=self.settings.retries,
            backoff_factor=0.2,
            status_forcelist=(502, 503, 504),
        )
        self._session = requests.Session()
        # Prometheus is on loopback or behind a local port-forward: an HTTP(S)_PROXY from the
        # environment must not capture those requests.
        self._session.trust_env = False
        self._connection = PrometheusConnect(
            url=self.url, retry=retry, timeout=timeout, session=self._session
        )

    def close(self) -> None:
        """Close the HTTP session."""
        self._connection.close()

    def __enter__(self) -> MetricsClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _fail(self, query: str, problem: object) -> MetricsError:
        # The query is quoted with backticks, not repr(), so its backslashes read as sent.
        inline = " ".join(query.split())
        return MetricsError(
            f"Prometheus query `{inline}` at {self.url} failed: {_one_line(problem)}"
        )

    def query_window(
        self,
        query: str,
        start: datetime | float,
        end: datetime | float,
        *,
        step: float | None = None,
    ) -> dict[str, Series]:
        """Samples of ``query`` from ``start`` to ``end``, one series per instance.

        Parameters
        ----------
        query:
            PromQL text (e.g. ``CPU_PERCENT.render()``) yielding one series per instance.
        start, end:
            The run's window: aware datetimes or Unix seconds. Kept to the millisecond
            (``prometheus-api-client`` would round them to whole seconds), rounded outwards.
        step:
            Resolution in seconds; default :attr:`MetricsSettings.step`.

        Returns
        -------
        dict
            Instance label to :class:`Series`.

        Raises
        ------
        ConfigError
            If the window is empty or reversed, or a time is naive.
        MetricsError
            If Prometheus cannot be reached, rejects the query or returns no series.
        """
        window = _Window(_as_datetime(start, "start"), _as_datetime(end, "end"))
        if window.end <= window.start:
            raise ConfigError(f"empty query window {window.describe()}: end must follow start")
        step_seconds = self.settings.step if step is None else step
        if not step_seconds > 0:
            raise ConfigError(f"invalid query step {step_seconds!r}: expected seconds > 0")
        # Prometheus keeps milliseconds; rounding outwards keeps the whole run in the window.
        params = {
            "start": f"{math.floor(window.start.timestamp() * 1000) / 1000:.3f}",
            "end": f"{math.ceil(window.end.timestamp() * 1000) / 1000:.3f}",
        }
        try:
            result = self._connection.custom_query_range(
                query,
                start_time=window.start,
                end_time=window.end,
                step=f"{step_seconds:g}",
                params=params,
            )
            series = parse_matrix(result)
        except (PrometheusApiClientException, requests.RequestException, MetricsError) as exc:
            raise self._fail(query, exc) from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise self._fail(query, f"unexpected answer ({type(exc).__name__}: {exc})") from exc
        if not series:
            raise self._fail(query, f"no data between {window.describe()}")
        try:
            return series_by_instance(series)
        except MetricsError as exc:
            raise self._fail(query, exc) from exc

    def reduce_window(
        self,
        query: str,
        start: datetime | float,
        end: datetime | float,
        *,
        reducer: Reducer = "mean",
        step: float | None = None,
    ) -> dict[str, float]:
        """One value per instance for ``query`` over a run's window.

        Parameters
        ----------
        query, start, end, step:
            As for :meth:`query_window`.
        reducer:
            See :func:`reduce_series`; the mean over the window by default.

        Returns
        -------
        dict
            Instance to value, in the query's unit.

        Raises
        ------
        MetricsError
            As for :meth:`query_window`, or when an instance has only ``NaN`` samples.
        """
        reduced: dict[str, float] = {}
        for instance, series in self.query_window(query, start, end, step=step).items():
            try:
                reduced[instance] = reduce_series(series, reducer)
            except MetricsError as exc:
                raise self._fail(query, exc) from exc
        return reduced

    def run_metrics(
        self,
        start: datetime | float,
        end: datetime | float,
        *,
        instances: Sequence[str] | Mapping[str, str] | None = None,
        reducer: Reducer = "mean",
    ) -> list[Measurement]:
        """CPU, RAM and receive rate of every node over a run's window.

        Parameters
        ----------
        start, end:
            The run's window (aware datetimes or Unix seconds).
        instances:
            Which ``instance`` labels to measure: a sequence, or a mapping from instance to
            the name to use in metric names (e.g. ``{"10.0.0.2:9100": "client"}``). Default:
            every instance that reports CPU.
        reducer:
            How the window becomes one value (mean by default).

        Returns
        -------
        list of Measurement
            For each instance, in order: ``cpu@<name>`` in ``%`` (all cores averaged),
            ``ram@<name>`` in ``MB`` (2**20 bytes) and ``receive_rate@<name>`` in ``bits/s``
            (summed over the interfaces matching :attr:`MetricsSettings.device_regex`).

        Raises
        ------
        MetricsError
            If a query fails, or a requested instance (or one reporting CPU) has no value
            for one of the metrics.
        """
        names: dict[str, str] | None
        if instances is None:
            names = None
        elif isinstance(instances, Mapping):
            names = dict(instances)
        else:
            names = {instance: instance for instance in instances}
        if names is not None and not names:
            raise ConfigError("instances must not be empty; pass None to measure every instance")
        values: dict[str, dict[str, float]] = {}
        for base, named in RUN_METRICS:
            query = named.render(
                window=self.settings.window,
                device_regex=self.settings.device_regex,
                instances=None if names is None else list(names),
            )
            try:
                reduced = self.reduce_window(query, start, end, reducer=reducer)
            except MetricsError as exc:
                if names is None:
                    raise
                raise MetricsError(f"{exc} (instances asked for: {', '.join(names)})") from exc
            if names is None:
                names = {instance: instance for instance in sorted(reduced)}
            missing = [instance for instance in names if instance not in reduced]
            if missing:
                raise self._fail(query, f"no {named.name} for instance(s) {missing}")
            values[base] = reduced
        assert names is not None  # set by the first query when not given
        return [
            Measurement(metric=f"{base}@{label}", value=values[base][instance], unit=named.unit)
            for instance, label in names.items()
            for base, named in RUN_METRICS
        ]

    def wait_until_ready(
        self,
        timeout: float = 30.0,
        *,
        expected_targets: int = 1,
        poll_interval: float = 0.2,
    ) -> None:
        """Block until Prometheus is ready and has scraped its targets at least once.

        Polls ``/-/ready`` and then the ``up`` series until ``expected_targets`` targets are
        up. Rate queries (``irate``) need two more scrapes after that.

        Parameters
        ----------
        timeout:
            Seconds to wait in total.
        expected_targets:
            How many targets must report ``up == 1``.
        poll_interval:
            Seconds between polls.

        Raises
        ------
        MetricsError
            If that does not happen within ``timeout``; the message says what was last seen.
        """
        deadline = Deadline(timeout)
        problem = "not polled yet"

        def ready() -> bool:
            nonlocal problem
            request_timeout = max(0.1, min(self.timeout, deadline.remaining()))
            try:
                response = self._session.get(f"{self.url}/-/ready", timeout=request_timeout)
                if response.status_code != 200:
                    problem = f"/-/ready answered HTTP {response.status_code}"
                    return False
                up = self._connection.custom_query("up", timeout=request_timeout)
            except (PrometheusApiClientException, requests.RequestException, ValueError) as exc:
                problem = str(exc)
                return False
            targets_up = sum(1 for item in up if item.get("value", [0, "0"])[1] == "1")
            problem = f"{targets_up} of {expected_targets} target(s) up"
            return targets_up >= expected_targets

        wait_for(
            ready,
            timeout=deadline,
            what=f"Prometheus at {self.url} to be ready",
            interval=poll_interval,
            last_seen=lambda: _one_line(problem),
            error=MetricsError,
        )

    def _instant_by_instance(self, query: str) -> dict[str, float]:
        """The value of instant ``query`` for each ``instance`` it returns."""
        try:
            result = self._connection.custom_query(query)
            return {str(item["metric"]["instance"]): float(item["value"][1]) for item in result}
        except (PrometheusApiClientException, requests.RequestException) as exc:
            raise self._fail(query, exc) from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise self._fail(query, f"unexpected answer ({type(exc).__name__}: {exc})") from exc

    def latest_scrapes(self, instances: Sequence[str]) -> dict[str, float]:
        """When the newest stored scrape of each of ``instances`` began, in Unix seconds
        (``timestamp(up)``); an instance without one is left out.

        Raises
        ------
        MetricsError
            If Prometheus cannot be reached or rejects the query.
        """
        return self._instant_by_instance(f"timestamp(up{{{label_selector(instances=instances)}}})")

    def wait_for_next_scrape(self, instances: Sequence[str], *, timeout: float = 15.0) -> None:
        """Block until each of ``instances`` has a scrape stored that is newer than its newest
        one at the call.

        Prometheus scrapes a target once at a time and stores a scrape's samples together, so
        then every sample scraped before the call can be queried: a run's window that ended
        before the call misses none of its last scrape, however late that one is stored.

        Parameters
        ----------
        instances:
            ``instance`` labels, as for :meth:`run_metrics`.
        timeout:
            Seconds to wait (several scrape intervals).

        Raises
        ------
        MetricsError
            If that does not happen within ``timeout`` (the message names the instances still
            without one), or a query fails.
        """
        before = self.latest_scrapes(instances)
        behind = list(instances)

        def scraped() -> bool:
            nonlocal behind
            latest = self.latest_scrapes(instances)
            behind = [i for i in instances if latest.get(i, -math.inf) <= before.get(i, -math.inf)]
            return not behind

        wait_for(
            scraped,
            timeout=timeout,
            what=f"Prometheus at {self.url} to store a new scrape of {', '.join(instances)}",
            interval=0.1,
            last_seen=lambda: f"none yet of {', '.join(behind)}",
            error=MetricsError,
        )

    def wait_for_rates(self, instances: Sequence[str], *, timeout: float = 30.0) -> None:
        """Block until the CPU ``irate`` has a value for each of ``instances``: two scrapes of
        each lie within :attr:`MetricsSettings.window`, which every rate of :meth:`run_metrics`
        needs from a run's first moment.

        Parameters
        ----------
        instances:
            ``instance`` labels, as for :meth:`run_metrics`.
        timeout:
            Seconds to wait.

        Raises
        ------
        MetricsError
            If that does not happen within ``timeout`` (the message names the instances still
            without a rate), or a query fails.
        """
        query = CPU_PERCENT.render(window=self.settings.window, instances=instances)
        missing = list(instances)

        def rated() -> bool:
            nonlocal missing
            rates = self._instant_by_instance(query)
            missing = [i for i in instances if not math.isfinite(rates.get(i, math.nan))]
            return not missing

        wait_for(
            rated,
            timeout=timeout,
            what=f"Prometheus at {self.url} to have a CPU rate of {', '.join(instances)}",
            interval=0.2,
            last_seen=lambda: f"none yet for {', '.join(missing)}",
            error=MetricsError,
        )
