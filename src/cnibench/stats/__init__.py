"""Statistics for benchmark results: summaries, intervals, comparisons and traffic-split accuracy.

Every function here is pure: data go in as the first argument(s), options are keyword-only, and a
frozen result dataclass comes out that keeps the raw material it was computed from (sample sizes,
levels, bootstrap distributions). The functions are unit-agnostic: an estimate carries the unit of
the values passed in (bits/s, µs, %, MB, seconds); shares and weights are fractions in [0, 1].

Use them from here (``from cnibench import stats``); each lives in the module of what it
estimates:

* :mod:`~cnibench.stats.summaries`: one sample or one condition's runs (:func:`describe`,
  :func:`summarize_runs`, truncated means, :func:`histogram`);
* :mod:`~cnibench.stats.outliers`: runs far from the others (:func:`outlier_report`,
  :func:`outlier_runs`, :func:`outlier_threshold`);
* :mod:`~cnibench.stats.intervals`: the mean of one sample with its interval (Student t,
  bootstrap, geometric mean);
* :mod:`~cnibench.stats.quantiles`: a percentile of one sample with its distribution-free
  interval (:func:`percentile_interval`, :func:`runs_to_bound`);
* :mod:`~cnibench.stats.contrasts`: two conditions against each other (:func:`compare`: Welch,
  Fieller, bootstrap) and :func:`holm_adjusted`;
* :mod:`~cnibench.stats.paired`: two conditions run in interleaved rounds, from the
  differences within rounds (:func:`paired_log_ratio`, :func:`paired_runs_needed`);
* :mod:`~cnibench.stats.families`: Holm's correction within each question's family
  (:func:`family_holm`) and the level of the interval that carries each call
  (:func:`call_levels`, :func:`interval_at_level`);
* :mod:`~cnibench.stats.sequential`: runs until decided, the planned looks and each look's
  level (:func:`look_schedule`, :func:`look_level`);
* :mod:`~cnibench.stats.tdist`: Student's t quantiles and tails for the layers above, which
  import no scipy (:func:`t_two_sided`, :func:`t_upper_tail`, ...);
* :mod:`~cnibench.stats.proportions`: yes/no outcomes (Clopper-Pearson, Wilson, Newcombe);
* :mod:`~cnibench.stats.splits`: traffic-split accuracy (:func:`splitting_error`: Goodman,
  Sison-Glaz; :func:`split_test` over runs), and :mod:`~cnibench.stats.time_windows` its shares
  over time (:func:`windowed_shares`);
* :mod:`~cnibench.stats.power`: power and precision (:func:`detectable_effect`,
  :func:`runs_needed`, :func:`split_test_power`, :func:`skew_detection_plan`,
  :func:`dispersion_spread`, :func:`requests_needed`);
* :mod:`~cnibench.stats._validation`: the input checks they all share.

Error policy
------------
* Bad *data* (empty input, NaN or infinite values, negative counts, mismatched lengths, missing
  backend labels) raises :class:`cnibench.errors.InsufficientDataError`.
* Bad *options* (``level`` outside (0, 1), negative or all-zero weights, weights and counts that
  name different backends, unknown ``method``, non-positive ``window`` or ``tolerance``) raises
  :class:`cnibench.errors.ConfigError`.
* Valid but degenerate data (a single value, zero variance) emits :class:`DegenerateDataWarning`
  and returns the degenerate result each function documents; it never crashes.

Both error types derive from :class:`ValueError`.
"""

from __future__ import annotations

from cnibench.stats._validation import BootstrapMethod as BootstrapMethod
from cnibench.stats._validation import DegenerateDataWarning
from cnibench.stats._validation import FloatArray as FloatArray
from cnibench.stats._validation import IntArray as IntArray
from cnibench.stats._validation import RandomSource as RandomSource
from cnibench.stats.contrasts import Comparison, compare, holm_adjusted
from cnibench.stats.families import call_levels, family_holm, family_sizes, interval_at_level
from cnibench.stats.intervals import Interval, confidence_interval, geometric_mean_interval
from cnibench.stats.outliers import _HAMPEL_THRESHOLDS as _HAMPEL_THRESHOLDS
from cnibench.stats.outliers import OUTLIER_FAMILY_RATE as OUTLIER_FAMILY_RATE
from cnibench.stats.outliers import OUTLIER_METHOD as OUTLIER_METHOD
from cnibench.stats.outliers import OUTLIER_THRESHOLD as OUTLIER_THRESHOLD
from cnibench.stats.outliers import Outlier, outlier_report, outlier_runs, outlier_threshold
from cnibench.stats.paired import (
    PairedDifference,
    paired_detectable_effect,
    paired_difference,
    paired_log_ratio,
    paired_power,
    paired_runs_needed,
)
from cnibench.stats.power import (
    SkewPlan,
    beyond_margin_power,
    detectable_effect,
    dispersion_spread,
    requests_needed,
    requests_to_detect_skew,
    runs_needed,
    sd_upper_factor,
    skew_detection_plan,
    split_test_power,
    variance_upper_factor,
)
from cnibench.stats.proportions import (
    ProportionDifference,
    proportion_difference,
    proportion_interval,
)
from cnibench.stats.quantiles import PercentileInterval, percentile_interval, runs_to_bound
from cnibench.stats.sequential import look_level, look_schedule
from cnibench.stats.splits import SplitResult, SplitTest, split_test, splitting_error
from cnibench.stats.summaries import (
    Histogram,
    RunSummary,
    Summary,
    describe,
    histogram,
    summarize_runs,
    trimmed_sample,
    truncated_mean,
    truncated_mean_interval,
)
from cnibench.stats.summaries import SummaryScale as SummaryScale
from cnibench.stats.tdist import t_critical, t_quantile, t_two_sided, t_upper_tail
from cnibench.stats.time_windows import windowed_shares

__all__ = [
    "Comparison",
    "DegenerateDataWarning",
    "Histogram",
    "Interval",
    "Outlier",
    "PairedDifference",
    "PercentileInterval",
    "ProportionDifference",
    "RunSummary",
    "SkewPlan",
    "SplitResult",
    "SplitTest",
    "Summary",
    "beyond_margin_power",
    "call_levels",
    "compare",
    "confidence_interval",
    "describe",
    "detectable_effect",
    "dispersion_spread",
    "family_holm",
    "family_sizes",
    "geometric_mean_interval",
    "histogram",
    "holm_adjusted",
    "interval_at_level",
    "look_level",
    "look_schedule",
    "outlier_report",
    "outlier_runs",
    "outlier_threshold",
    "paired_detectable_effect",
    "paired_difference",
    "paired_log_ratio",
    "paired_power",
    "paired_runs_needed",
    "percentile_interval",
    "proportion_difference",
    "proportion_interval",
    "requests_needed",
    "requests_to_detect_skew",
    "runs_needed",
    "runs_to_bound",
    "sd_upper_factor",
    "skew_detection_plan",
    "split_test",
    "split_test_power",
    "splitting_error",
    "summarize_runs",
    "t_critical",
    "t_quantile",
    "t_two_sided",
    "t_upper_tail",
    "trimmed_sample",
    "truncated_mean",
    "truncated_mean_interval",
    "variance_upper_factor",
    "windowed_shares",
]
