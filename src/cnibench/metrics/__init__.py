"""Node metrics from Prometheus: seed 001's formulas as named queries, and a client for them.

>>> from cnibench.metrics import MetricsClient, CPU_PERCENT
>>> CPU_PERCENT.render(window="5s")
'100 - 100 * avg by (instance) (irate(node_cpu_seconds_total{mode="idle"}[5s]))'
"""

from __future__ import annotations

from cnibench.metrics.config import prometheus_config
from cnibench.metrics.prometheus import (
    REDUCERS,
    RUN_METRICS,
    MatrixResponse,
    MatrixSeries,
    MetricsClient,
    MetricsSettings,
    Reducer,
    Series,
    matrix_from_response,
    parse_matrix,
    reduce_series,
    series_by_instance,
)
from cnibench.metrics.queries import (
    CPU_PERCENT,
    DEFAULT_DEVICE_REGEX,
    DEFAULT_WINDOW,
    NAMED_QUERIES,
    RAM_MB,
    RECEIVE_RATE,
    RECEIVE_RATE_BITS,
    NamedQuery,
    label_selector,
    promql_string,
    validate_duration,
)

__all__ = [
    "CPU_PERCENT",
    "DEFAULT_DEVICE_REGEX",
    "DEFAULT_WINDOW",
    "NAMED_QUERIES",
    "RAM_MB",
    "RECEIVE_RATE",
    "RECEIVE_RATE_BITS",
    "REDUCERS",
    "RUN_METRICS",
    "MatrixResponse",
    "MatrixSeries",
    "MetricsClient",
    "MetricsSettings",
    "NamedQuery",
    "Reducer",
    "Series",
    "label_selector",
    "matrix_from_response",
    "parse_matrix",
    "prometheus_config",
    "promql_string",
    "reduce_series",
    "series_by_instance",
    "validate_duration",
]
