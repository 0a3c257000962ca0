"""Power and precision before measuring: the smallest difference a two-sample t test detects and
the runs a margin needs, the requests or runs a split test needs to see a skew, and the requests
that pin every share of a split down to a tolerance."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt
from scipy import integrate, optimize
from scipy import stats as sps

from cnibench.errors import ConfigError, InsufficientDataError
from cnibench.stats._validation import (
    _shown,
    _validated_level,
    _validated_positive,
    _validated_weights,
)


def t_test_power(noncentrality: float, df: float, alpha: float) -> float:
    """Power of a two-sided t test with ``df`` degrees of freedom at ``alpha`` when the
    statistic is noncentral t with ``noncentrality``.

    scipy's noncentral t returns NaN for some small ``df`` and far tails (df 2, alpha 0.0125,
    noncentrality 8); there the power is integrated directly over the chi-square of the
    denominator: ``E[Phi(nc - c sqrt(V/df)) + Phi(-nc - c sqrt(V/df))]``, ``V ~ chi2(df)``.
    """
    crit = float(sps.t.ppf(1.0 - alpha / 2.0, df))
    power = float(sps.nct.sf(crit, df, noncentrality) + sps.nct.cdf(-crit, df, noncentrality))
    if math.isfinite(power):
        return power

    def density(v: float) -> float:
        scale = crit * math.sqrt(v / df)
        tails = sps.norm.cdf(noncentrality - scale) + sps.norm.cdf(-noncentrality - scale)
        return float(tails * sps.chi2.pdf(v, df))

    value, _ = integrate.quad(density, 0.0, math.inf, limit=200)
    return min(1.0, max(0.0, float(value)))


def _two_sample_power(effect: float, n1: float, n2: float, alpha: float) -> float:
    """Power of the two-sided two-sample t test (pooled df) for a standardized effect."""
    df = n1 + n2 - 2.0
    return t_test_power(effect * math.sqrt(n1 * n2 / (n1 + n2)), df, alpha)


def detectable_effect(
    sd: float, n_control: int, n_treatment: int, *, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest true difference a two-sample t test detects with ``power`` at ``alpha``.

    Parameters
    ----------
    sd : float
        Run-to-run standard deviation, on the scale compared (of the logarithms for a ratio).
    n_control, n_treatment : int
        Runs per side (at least 2 each).
    alpha : float, default 0.05
        Two-sided significance level.
    power : float, default 0.8
        Wanted power.

    Returns
    -------
    float
        The difference in the unit of ``sd`` (``exp`` of it minus 1 is the relative change
        for a log-scale ``sd``); from the noncentral t distribution, as
        ``statsmodels.stats.power.TTestIndPower`` solves it.
    """
    if n_control < 2 or n_treatment < 2:
        raise InsufficientDataError("power needs at least 2 runs per side")
    scale = _validated_positive(sd, "sd")
    _validated_level(alpha)
    _validated_level(power)
    n1, n2 = float(n_control), float(n_treatment)
    hi = 1.0
    while _two_sample_power(hi, n1, n2, alpha) < power:
        hi *= 2.0
    effect = optimize.brentq(
        lambda d: _two_sample_power(d, n1, n2, alpha) - power, 0.0, hi, xtol=1e-10, rtol=1e-10
    )
    return float(effect) * scale


def runs_needed(
    sd: float,
    margin: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    most: int = 100_000,
    df_sd: float = math.inf,
) -> int:
    """Runs per side for a two-sample t test to detect a difference of ``margin``.

    Parameters
    ----------
    sd : float
        Run-to-run standard deviation on the compared scale (logarithms for a ratio).
    margin : float
        The difference to detect, same scale (``log(1.05)`` for ±5 %).
    alpha, power : float
        Two-sided level and wanted power.
    most : int
        Give up above this many (returned as is).
    df_sd : float, default inf
        Degrees of freedom ``sd`` was estimated with. With a finite value ``sd`` is first
        raised to its one-sided 80 % upper confidence bound (``sd * sqrt(df / chi2_0.2(df))``):
        an SD estimated from a few runs comes out low about half the time, and the runs
        planned from it would then fall short of ``power``.

    Returns
    -------
    int
        Smallest equal ``n`` per side (at least 2) reaching ``power``.
    """
    scale = _validated_positive(sd, "sd")
    size = _validated_positive(margin, "margin")
    _validated_level(alpha)
    _validated_level(power)
    scale *= sd_upper_factor(df_sd)
    effect = size / scale

    def enough(n: int) -> bool:
        return _two_sample_power(effect, n, n, alpha) >= power

    return smallest_enough(enough, most=most)


def smallest_enough(enough: Callable[[int], bool], *, most: int) -> int:
    """The smallest ``n >= 2`` for which ``enough(n)`` holds (``enough`` must be monotone in
    ``n``, as a power is), by doubling then bisection; ``most`` when even that is not."""
    if enough(2):
        return 2
    lo, hi = 2, 4
    while not enough(hi):
        if hi >= most:
            return most
        lo, hi = hi, min(2 * hi, most)
    return _bisect(enough, lo, hi)


def _bisect(enough: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest ``n`` in ``(lo, hi]`` for which the monotone ``enough(n)`` holds, given
    that it holds at ``hi`` and not at ``lo``."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi


SD_UPPER_QUANTILE = 0.2
"""The lower chi-square quantile :func:`sd_upper_factor` uses: an SD raised to its one-sided
80 % upper bound."""


def sd_upper_factor(df: float) -> float:
    """Factor that raises an SD estimated with ``df`` degrees of freedom to its one-sided 80 %
    upper confidence bound, ``sqrt(df / chi2_0.2(df))`` (1 for ``df = inf``).

    Raises
    ------
    InsufficientDataError
        ``df`` below 1: an SD from one value has no bound.
    """
    if not math.isfinite(df):
        return 1.0
    if df < 1:
        raise InsufficientDataError("an SD from fewer than 2 values has no upper bound")
    return math.sqrt(variance_upper_factor(df, assurance=1.0 - SD_UPPER_QUANTILE))


def variance_upper_factor(df: float, *, assurance: float) -> float:
    """Factor that raises a variance estimated with ``df`` degrees of freedom to its
    one-sided ``assurance`` upper confidence bound, ``df / chi2_(1 - assurance)(df)`` (NaN for
    ``df`` of 0: no bound)."""
    return df / float(sps.chi2.ppf(1.0 - assurance, df))


def beyond_margin_power(shift: float, limit: float, se: float, df: float, *, alpha: float) -> float:
    """Power of a one-sided t test at ``alpha`` (standard error ``se``, ``df`` degrees of
    freedom) for a true ``shift``, times the chance that the estimate also lies beyond
    ``limit``: the gate calls a regression only when both hold. The noncentral t gives the
    first, the normal approximation the second; 1 or 0 without noise."""
    if not se > 0:
        return 1.0 if shift > limit else 0.0
    critical = float(sps.t.isf(alpha, df))
    significant = float(sps.nct.sf(critical, df, shift / se))
    beyond = float(sps.norm.cdf((shift - limit) / se))
    return significant * beyond


def requests_to_detect_skew(
    weights: Mapping[str, float] | Sequence[float],
    *,
    skew: float = 0.05,
    power: float = 0.9,
    alpha: float = 0.01,
    dispersion: float = 1.0,
) -> int:
    """Requests a pooled split test needs to detect ``skew`` with ``power`` at ``alpha``.

    Parameters
    ----------
    weights : Mapping[str, float] or sequence of float
        Configured weights (any scale; weight-0 backends are not tested).
    skew : float, default 0.05
        Share moved from one backend to another (0.05 = five percentage points, a 70/30
        route served as 65/35), in (0, 1).
    power : float, default 0.9
        Wanted probability of rejecting the weights under that skew.
    alpha : float, default 0.01
        Level of the test.
    dispersion : float, default 1
        Overdispersion between runs (:attr:`SplitTest.dispersion`); the answer scales with it.

    Returns
    -------
    int
        Smallest total ``N`` with ``P(X^2 > chi2_{1-alpha, K-1}) >= power`` under the
        noncentral chi-square with :math:`\\lambda = N \\delta^2 (1/w_i + 1/w_j)`, the skew
        between the two largest weights (the hardest to see), times ``dispersion``.

    Notes
    -----
    ``statsmodels.stats.power.GofChisquarePower`` solves the same equation with effect size
    :math:`\\sqrt{\\lambda / N}` and ``n_bins = K``. That is the power with the dispersion
    known, i.e. with many runs. :func:`split_test` with a few runs estimates the dispersion
    with :math:`(R-1)(K-1)` degrees of freedom and has far less: for a 60/40 split this
    function's 1429 requests have power 0.56 over 5 runs, not 0.9. For the test at hand use
    :func:`skew_detection_plan`, which also says when only more runs can help.
    """
    shares = _validated_weights(weights)
    delta = _validated_positive(skew, "skew")
    if delta >= 1.0:
        raise ConfigError(f"skew is a share and must be below 1, got {_shown(skew)}")
    _validated_level(power)
    _validated_level(alpha)
    phi = max(1.0, _validated_positive(dispersion, "dispersion"))
    positive = sorted((w for w in shares.values() if w > 0.0), reverse=True)
    if len(positive) < 2:
        raise ConfigError("a split with fewer than two weighted backends has nothing to test")
    total = sum(positive)
    first, second = positive[0] / total, positive[1] / total
    per_request = delta**2 * (1.0 / first + 1.0 / second)
    df = len(positive) - 1
    critical = float(sps.chi2.isf(alpha, df))

    def reached(n: int) -> bool:
        return float(sps.ncx2.sf(critical, df, n * per_request)) >= power

    lo, hi = 1, 2
    while not reached(hi):
        lo, hi = hi, hi * 2
    return math.ceil(_bisect(reached, lo, hi) * phi)


def _skew_per_request(shares: Mapping[str, float], delta: float) -> tuple[float, int]:
    """Noncentrality per request of a ``delta`` skew between the two largest weights, and the
    test's degrees of freedom (weighted backends minus one)."""
    positive = sorted((w for w in shares.values() if w > 0.0), reverse=True)
    if len(positive) < 2:
        raise ConfigError("a split with fewer than two weighted backends has nothing to test")
    total = sum(positive)
    first, second = positive[0] / total, positive[1] / total
    return delta**2 * (1.0 / first + 1.0 / second), len(positive) - 1


@cache
def _legendre(nodes: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Gauss-Legendre nodes and weights on [-1, 1] (cached: every power call uses them)."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    return x, w


def _split_test_powers(
    noncentrality: float,
    dispersions: npt.NDArray[np.float64],
    df: int,
    df_between: int,
    alpha: float,
) -> npt.NDArray[np.float64]:
    """Power of split_test's rule at each of ``dispersions``: the F test when its dispersion
    estimate exceeds 1, else the chi-square test, with ``X^2 / phi`` noncentral chi-square
    (``noncentrality / phi``) and ``phi_hat = phi V / d``, ``V`` chi-square with
    ``d = df_between``, independent.

    The F branch is integrated over ``V``'s probabilities above the switch to the F test,
    ``u = F_V(v)``, by 64-point Gauss-Legendre: the integrand is smooth in ``u`` and bounded,
    and one call covers many dispersions (scipy's ``quad`` per dispersion took 30 ms each;
    the two agree within 1e-4).
    """
    phi = np.maximum(1.0, np.asarray(dispersions, dtype=np.float64))
    shifted = noncentrality / phi
    chi_critical = float(sps.chi2.isf(alpha, df))
    by_chi_test = sps.ncx2.sf(chi_critical / phi, df, shifted)
    if df_between == 0:
        return np.asarray(np.clip(by_chi_test, 0.0, 1.0), dtype=np.float64)
    f_critical = float(sps.f.isf(alpha, df, df_between))
    below = sps.chi2.cdf(df_between / phi, df_between)  # V below this: phi_hat <= 1, chi2
    x, w = _legendre(64)
    u = below[:, None] + (1.0 - below)[:, None] * (x[None, :] + 1.0) / 2.0
    v = sps.chi2.ppf(u, df_between)
    rejected = sps.ncx2.sf(df * f_critical * v / df_between, df, shifted[:, None])
    by_f = (1.0 - below) / 2.0 * (rejected @ w)
    return np.asarray(np.clip(by_f + below * by_chi_test, 0.0, 1.0), dtype=np.float64)


def _split_test_power(
    noncentrality: float, dispersion: float, df: int, df_between: int, alpha: float
) -> float:
    """:func:`_split_test_powers` at one dispersion."""
    return float(
        _split_test_powers(noncentrality, np.array([dispersion]), df, df_between, alpha)[0]
    )


DISPERSION_NODES = 64
"""Equal-probability nodes over which a plan averages the power when the dispersion was
estimated (:func:`dispersion_spread`)."""


def dispersion_spread(df: float, *, nodes: int = DISPERSION_NODES) -> npt.NDArray[np.float64]:
    """Factors that spread a dispersion estimated with ``df`` degrees of freedom over what the
    true dispersion may be: ``df / chi2_u(df)`` at ``u = (i + 1/2) / nodes``.

    An estimate is ``phi V / df`` with ``V`` chi-square with ``df`` degrees of freedom, so
    given the estimate the dispersion is the estimate times ``df / V`` (its fiducial
    distribution); the factors are that distribution's quantiles at equal steps of
    probability, so the mean of a bounded function over ``estimate * factors`` is its
    expectation. ``[1]`` for ``df = inf`` (the dispersion known).

    Raises
    ------
    InsufficientDataError
        ``df`` below 1.
    """
    if not math.isfinite(df):
        return np.ones(1)
    if df < 1:
        raise InsufficientDataError("a dispersion from fewer than 2 runs has no distribution")
    u = (np.arange(nodes) + 0.5) / nodes
    return np.asarray(df / sps.chi2.ppf(u, df), dtype=np.float64)


def _validated_runs(runs: int, name: str = "runs") -> int:
    if isinstance(runs, bool) or not isinstance(runs, int | np.integer) or runs < 1:
        raise ConfigError(f"{name} must be a whole number >= 1, got {_shown(runs)}")
    return int(runs)


def split_test_power(
    weights: Mapping[str, float] | Sequence[float],
    *,
    requests: float,
    runs: int,
    skew: float = 0.05,
    alpha: float = 0.01,
    dispersion: float = 1.0,
) -> float:
    """Power of :func:`split_test` to reject the weights when ``skew`` moved between backends.

    Parameters
    ----------
    weights : Mapping[str, float] or sequence of float
        Configured weights (any scale; weight-0 backends are not tested).
    requests : float
        Requests pooled over all runs.
    runs : int
        Runs they are spread over (equally).
    skew : float, default 0.05
        Share moved from the largest weight to the second largest (0.05 = five points).
    alpha : float, default 0.01
        Level of the test.
    dispersion : float, default 1
        Between-run overdispersion at ``requests / runs`` requests per run (values below 1
        count as 1, as the test floors its estimate).

    Returns
    -------
    float
        The probability that ``split_test(...).p_value < alpha``, in [0, 1].

    Notes
    -----
    :func:`split_test` uses the F test :math:`(X^2/(K-1))/\\hat\\phi \\sim F_{K-1,d}`,
    :math:`d = (R-1)(K-1)`, when :math:`\\hat\\phi > 1`, else the chi-square test of
    :math:`X^2`. With :math:`X^2/\\phi` noncentral chi-square with :math:`K-1` df and
    noncentrality :math:`\\lambda/\\phi`, :math:`\\lambda = N\\delta^2(1/w_1 + 1/w_2)`, and
    :math:`\\hat\\phi = \\phi V/d` with :math:`V \\sim \\chi^2_d` independent of it, the power
    is the integral of both branches over :math:`V`. With many runs it tends to the
    noncentral chi-square power :func:`requests_to_detect_skew` solves; with 5 runs it is
    far below it (1429 requests give 0.57, not 0.9, for a 5-point skew of a 60/40 split).
    """
    shares = _validated_weights(weights)
    delta = _validated_positive(skew, "skew")
    if delta >= 1.0:
        raise ConfigError(f"skew is a share and must be below 1, got {_shown(skew)}")
    _validated_level(alpha)
    n = _validated_positive(requests, "requests")
    r = _validated_runs(runs)
    phi = _validated_positive(dispersion, "dispersion")
    per_request, df = _skew_per_request(shares, delta)
    return _split_test_power(n * per_request, phi, df, (r - 1) * df, alpha)


@dataclass(frozen=True)
class SkewPlan:
    """How many requests :func:`split_test` needs to see a skew, or that runs are needed.

    Attributes
    ----------
    skew:
        Share moved between the two largest weights (0.05 = five points).
    power_wanted:
        The power asked for.
    alpha:
        Level of the test.
    runs:
        Runs the requests are spread over.
    requests:
        Fewest requests pooled over ``runs`` runs whose power reaches ``power_wanted``; None
        when no number of requests can at this many runs (see ``runs_needed``).
    power:
        Power of :func:`split_test` at ``requests``; when unreachable, the most any number of
        requests gives at ``runs`` runs (its limit). With ``dispersion_df`` finite, its mean
        over what the dispersion may be given its estimate.
    runs_needed:
        ``runs`` when reachable; else the fewest runs of ``requests_per_run`` requests each
        that reach ``power_wanted`` (each then trimmed to ``run_requests``).
    requests_per_run:
        Requests per run at which ``dispersion`` was measured.
    dispersion:
        Between-run dispersion at ``requests_per_run``: at least 1 when known; the estimate
        as given (it may be below 1) when ``dispersion_df`` is finite.
    dispersion_df:
        Degrees of freedom ``dispersion`` was estimated with (``inf``: taken as known).
    run_requests:
        None when reachable; else the fewest requests per run at which ``runs_needed`` runs
        reach ``power_wanted`` (at most ``requests_per_run``, rounded up).
    """

    skew: float
    power_wanted: float
    alpha: float
    runs: int
    requests: int | None
    power: float
    runs_needed: int
    requests_per_run: float
    dispersion: float
    dispersion_df: float = math.inf
    run_requests: int | None = None

    @property
    def reachable(self) -> bool:
        """True when more requests at ``runs`` runs reach the power; else more runs are
        needed."""
        return self.requests is not None

    def statement(self) -> str:
        """One clause for a report, e.g. ``"a 5-point skew needs about 2713 requests over 5
        runs (power 0.9, alpha 0.01)"``; with an estimated dispersion the parenthesis adds
        ``"allowing for a dispersion estimated with 4 df"``."""
        what = f"a {100 * self.skew:g}-point skew"
        wanted = f"power {self.power_wanted:g}, alpha {self.alpha:g}"
        if math.isfinite(self.dispersion_df):
            wanted += f", allowing for a dispersion estimated with {self.dispersion_df:g} df"
        if self.requests is not None:
            return f"{what} needs about {self.requests} requests over {self.runs} run(s) ({wanted})"
        vary = "may vary" if math.isfinite(self.dispersion_df) else "vary"
        return (
            f"{what}: no number of requests over {self.runs} run(s) reaches {wanted} (at most"
            f" {self.power:.2f}: the runs {vary} too much); about {self.runs_needed} runs of"
            f" {self.run_requests or math.ceil(self.requests_per_run)} requests do"
        )


def skew_detection_plan(
    weights: Mapping[str, float] | Sequence[float],
    *,
    runs: int,
    requests_per_run: float,
    dispersion: float = 1.0,
    dispersion_df: float = math.inf,
    skew: float = 0.05,
    power: float = 0.9,
    alpha: float = 0.01,
    most_runs: int = 100_000,
) -> SkewPlan:
    """Requests :func:`split_test` needs at ``runs`` runs to detect ``skew``, or runs instead.

    Parameters
    ----------
    weights : Mapping[str, float] or sequence of float
        Configured weights (any scale; weight-0 backends are not tested).
    runs : int
        Runs the test pools (e.g. :attr:`SplitTest.runs`).
    requests_per_run : float
        Requests per run at which ``dispersion`` was measured (:attr:`SplitTest.n` divided by
        :attr:`SplitTest.runs`).
    dispersion : float, default 1
        Between-run overdispersion measured there: the true one when ``dispersion_df`` is
        infinite (values below 1 count as 1); else the estimate before its floor at 1
        (:attr:`SplitTest.dispersion_estimate`, which may be below 1 or 0).
    dispersion_df : float, default inf
        Degrees of freedom of that estimate (:attr:`SplitTest.dispersion_df`, at least 1).
        With a finite value the power is averaged over the dispersion's distribution given
        the estimate (:func:`dispersion_spread`) rather than computed at the estimate: from
        a pilot of 5 runs (4 df) the estimate is often low, and the design planned from it
        delivered 0.78 on average instead of 0.9 when shares vary 2 points between runs.
    skew, power, alpha : float
        Share moved between the two largest weights, wanted power, level of the test.
    most_runs : int, default 100000
        Give up looking for runs above this many (returned as is).

    Returns
    -------
    SkewPlan
        ``requests`` with its power from :func:`split_test_power` (the test's own F or
        chi-square rule with ``(runs - 1)(K - 1)`` df for the dispersion), or, when no number
        of requests reaches ``power``, ``requests = None``, ``runs_needed`` and ``run_requests``.

    Notes
    -----
    Runs whose shares vary by :math:`\\tau` have dispersion :math:`\\phi(m) = 1 + (m - 1)\\beta`
    at :math:`m` requests per run, :math:`\\beta = \\tau^2/(p(1-p))` (exact for a
    Dirichlet-multinomial). ``dispersion`` at ``requests_per_run`` gives :math:`\\beta`, so
    more requests per run raise the dispersion too: the noncentrality
    :math:`\\lambda/\\phi` tends to :math:`R\\delta^2(1/w_1+1/w_2)/\\beta` and the power to
    that of the noncentral F with it. When that limit is below ``power``, only runs help, and
    ``runs_needed`` is the fewest runs of ``requests_per_run`` requests that reach it.

    An estimated dispersion is :math:`\\phi V/d` with :math:`V \\sim \\chi^2_d`; the plan
    then averages the power over :math:`\\hat\\phi d / V` (each value floored at 1), so the
    power it states is the chance that the followed design rejects, over what the pilot may
    have been. It is an average, not a bound: a design planned from a pilot that happened to
    see little dispersion still falls short of ``power``, one from a pilot that saw much
    exceeds it. Where the dispersion is well above 1 the design scales with the estimate,
    and the noncentrality it then really has varies over pilots as :math:`V/d`, the law the
    plan averaged over, so the mean delivered power is the stated one; near 1 the test's
    floor makes the plan conservative. Followed from pilots of 5 runs of 1000 requests, it
    delivered 0.906 for 0.9 at 2 points of share spread and 0.955 at 1 point (whole runs of
    the pilot's size, before ``run_requests``: 0.925 and 0.958). Planning
    from an upper confidence bound of the dispersion would overshoot the stated power on
    average further still. ``bench/coverage.py`` checks the stated power
    against simulated split tests (section ``split-power``) and against following the
    advice of simulated pilots (section ``split-advice``).

    Examples
    --------
    >>> plan = skew_detection_plan({"v1": 60, "v2": 40}, runs=5, requests_per_run=1000)
    >>> plan.requests, round(plan.power, 2)
    (4378, 0.9)
    """
    shares = _validated_weights(weights)
    delta = _validated_positive(skew, "skew")
    if delta >= 1.0:
        raise ConfigError(f"skew is a share and must be below 1, got {_shown(skew)}")
    wanted = _validated_level(power)
    level = _validated_level(alpha)
    r = _validated_runs(runs)
    ceiling = _validated_runs(most_runs, "most_runs")
    m = _validated_positive(requests_per_run, "requests_per_run")
    spread = dispersion_spread(_validated_df(dispersion_df))
    if spread.size == 1:
        phi = max(1.0, _validated_positive(dispersion, "dispersion"))
    else:
        phi = _validated_estimate(dispersion)
    per_request, df = _skew_per_request(shares, delta)
    # One slope beta per value the dispersion may take (one value when it is known).
    slopes = np.maximum(phi * spread - 1.0, 0.0) / (m - 1.0) if m > 1.0 else np.zeros(1)

    def power_at(n: float, r_: int, slopes_: npt.NDArray[np.float64], m_: float) -> float:
        phis = 1.0 + slopes_ * max(m_ - 1.0, 0.0)
        return float(np.mean(_split_test_powers(n * per_request, phis, df, (r_ - 1) * df, level)))

    def power_with_requests(n: int) -> float:
        return power_at(n, r, slopes, n / r)

    limit = _power_limit(r, slopes, per_request, df, level)
    if limit < wanted:

        def reached(count: int) -> bool:
            return power_at(count * m, count, slopes, m) >= wanted

        lo, hi = r, r + 1
        while not reached(hi) and hi < ceiling:
            lo, hi = hi, min(2 * hi, ceiling)
        k = _bisect(reached, lo, hi)
        # Whole runs of m requests overshoot: the fewest runs are trimmed to the fewest
        # requests per run that still reach the power (followed from pilots of 5 runs at 1
        # point of share spread, whole runs delivered 0.958 for 0.9).
        total = _bisect(lambda n: power_at(n, k, slopes, n / k) >= wanted, 0, math.ceil(k * m))
        per_run = min(math.ceil(total / k), math.ceil(m))
        return SkewPlan(
            delta, wanted, level, r, None, limit, k, m, phi, dispersion_df, run_requests=per_run
        )
    lo, hi = 0, max(r, 2)
    while power_with_requests(hi) < wanted:
        lo, hi = hi, hi * 2
    n = _bisect(lambda count: power_with_requests(count) >= wanted, lo, hi)
    return SkewPlan(delta, wanted, level, r, n, power_with_requests(n), r, m, phi, dispersion_df)


def _power_limit(
    runs: int, slopes: npt.NDArray[np.float64], per_request: float, df: int, alpha: float
) -> float:
    """The power no number of requests over ``runs`` runs exceeds: the noncentral F with
    noncentrality ``runs * per_request / beta``, averaged over ``slopes`` (1 where a slope is
    0: the runs do not vary, and requests alone reach any power)."""
    if runs < 2:
        return 1.0
    d = (runs - 1) * df
    varying = slopes > 0.0
    limits = np.ones(slopes.shape)
    if varying.any():
        critical = float(sps.f.isf(alpha, df, d))
        limits[varying] = sps.ncf.sf(critical, df, d, runs * per_request / slopes[varying])
    return float(np.mean(limits))


def _validated_df(df: float) -> float:
    if isinstance(df, bool) or not isinstance(df, int | float | np.integer | np.floating):
        raise ConfigError(f"dispersion_df must be a number >= 1, got {_shown(df)}")
    if math.isnan(df) or df < 1:
        raise ConfigError(f"dispersion_df must be a number >= 1 or inf, got {_shown(df)}")
    return float(df)


def _validated_estimate(dispersion: float) -> float:
    if isinstance(dispersion, bool) or not isinstance(
        dispersion, int | float | np.integer | np.floating
    ):
        raise ConfigError(f"dispersion must be a number >= 0, got {_shown(dispersion)}")
    if not (math.isfinite(dispersion) and dispersion >= 0.0):
        raise ConfigError(f"dispersion must be a finite number >= 0, got {_shown(dispersion)}")
    return float(dispersion)


def requests_needed(
    weights: Mapping[str, float] | Sequence[float],
    *,
    tolerance: float,
    level: float = 0.95,
) -> int:
    """Number of requests after which every backend's share is known to within ``tolerance``.

    Parameters
    ----------
    weights : Mapping[str, float] or sequence of float
        Configured weights (any scale, normalised), e.g. ``{"v1": 95, "v2": 5}``.
    tolerance : float
        Largest acceptable half-width of each share's simultaneous interval, as a fraction
        (0.01 = one percentage point), in (0, 1).
    level : float, default 0.95
        Simultaneous confidence level, strictly between 0 and 1.

    Returns
    -------
    int
        Smallest ``n >= 1`` for which the Goodman interval of every backend, computed at its
        expected count ``n * p_i``, has half-width ``<= tolerance``.

    Raises
    ------
    ConfigError
        Bad weights, ``tolerance`` outside (0, 1), ``level`` outside (0, 1).

    Notes
    -----
    The Goodman interval (see :func:`splitting_error`) of a share :math:`p` with :math:`k`
    backends has half-width :math:`h(n) = \\sqrt{A^2 + 4Anp(1-p)} / (2(n + A))` with
    :math:`A = \\chi^2_{1,\\,1-\\alpha/k}` (a Bonferroni split of :math:`\\alpha`), decreasing in
    :math:`n`. The worst backend is the one whose weight is nearest 0.5 (largest
    :math:`q = p(1-p)`); :math:`h(n) \\le \\varepsilon` is the quadratic
    :math:`4\\varepsilon^2 n^2 + (8\\varepsilon^2 A - 4Aq) n + (4\\varepsilon^2 - 1)A^2 \\ge 0`,
    whose larger root, rounded up, is the answer (checked against :math:`h` to absorb rounding).
    For large :math:`n` this is the familiar :math:`n \\approx A q / \\varepsilon^2`. With a single
    backend there is nothing to estimate and the answer is 1.

    Examples
    --------
    >>> requests_needed({"v1": 60, "v2": 40}, tolerance=0.02)
    3010
    """
    shares = _validated_weights(weights)
    epsilon = _validated_positive(tolerance, "tolerance")
    if epsilon >= 1.0:
        raise ConfigError(f"tolerance is a share and must be below 1, got {_shown(tolerance)}")
    confidence = _validated_level(level)
    k = len(shares)
    if k == 1:
        return 1
    a = float(sps.chi2.ppf(1.0 - (1.0 - confidence) / k, 1))
    q = max(p * (1.0 - p) for p in shares.values())

    def half_width(n: int) -> float:
        return math.sqrt(a * a + 4.0 * a * n * q) / (2.0 * (n + a))

    quad_b = 8.0 * epsilon**2 * a - 4.0 * a * q
    quad_c = (4.0 * epsilon**2 - 1.0) * a * a
    discriminant = quad_b**2 - 16.0 * epsilon**2 * quad_c
    root = (-quad_b + math.sqrt(max(discriminant, 0.0))) / (8.0 * epsilon**2)
    n = max(1, math.ceil(root))
    while half_width(n) > epsilon:
        n += 1
    while n > 1 and half_width(n - 1) <= epsilon:
        n -= 1
    return n
