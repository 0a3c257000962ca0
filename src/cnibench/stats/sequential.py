"""Runs until decided: when a session looks at its contrasts, and at what level.

``cnibench run --until-decided`` adds interleaved rounds to the conditions whose contrasts are
still undecided, and looks again. Each look is a test, so looking K times at the usual 5 %
would call a cost that is not there far more often than 5 % of the time. The rule here is the
simplest that holds whatever the looks' dependence: the looks are fixed before the first run
(:func:`look_schedule`: the profile's rounds, then doubling, up to ``--max-runs``), and every
look tests at ``alpha / K`` (Bonferroni over the K planned looks, :func:`look_level`). By the
union bound a contrast's chance of any false call over all its looks stays at most ``alpha``,
for the cost call and for "same within ±m" alike, and a contrast that stops at an early look
keeps the call it had there.

Group-sequential boundaries (Pocock's, O'Brien-Fleming's through an alpha-spending function)
spend alpha more cleverly, but they rest on the joint normality of the looks' statistics with a
known variance; with 5-40 rounds and a variance estimated at each look, the t statistics'
joint law is not theirs, while Bonferroni needs nothing. Doubling keeps K small (4 looks from
5 to 30 rounds), so the price is a level of 0.0125 instead of 0.05: about 1.4 times the rounds
of a single look for the same power, paid only by the contrasts that need them
(``bench/coverage.py``'s ``until-decided`` section measures the error per cell and the mean
rounds to a decision).
"""

from __future__ import annotations

from cnibench.errors import ConfigError

__all__ = ["look_level", "look_schedule"]


def look_schedule(first: int, most: int) -> tuple[int, ...]:
    """The rounds after which a session looks at its contrasts: ``first``, then doubling,
    then ``most`` (each look at least one round after the one before).

    Parameters
    ----------
    first:
        Rounds of the first look (the profile's runs), at least 2 (a paired interval needs
        two rounds).
    most:
        Rounds of the last look (``--max-runs``), at least ``first``.

    Examples
    --------
    >>> look_schedule(5, 30)
    (5, 10, 20, 30)
    >>> look_schedule(5, 5)
    (5,)
    >>> look_schedule(2, 9)
    (2, 4, 8, 9)
    """
    if isinstance(first, bool) or not isinstance(first, int) or first < 2:
        raise ConfigError(f"the first look needs at least 2 rounds, got {first!r}")
    if isinstance(most, bool) or not isinstance(most, int) or most < first:
        raise ConfigError(f"the last look ({most!r} rounds) must be at least the first ({first})")
    looks = [first]
    while looks[-1] * 2 < most:
        looks.append(looks[-1] * 2)
    if looks[-1] < most:
        looks.append(most)
    return tuple(looks)


def look_level(level: float, looks: int) -> float:
    """The confidence level of each of ``looks`` planned looks for an overall ``level``:
    ``1 - (1 - level) / looks`` (Bonferroni).

    Examples
    --------
    >>> round(look_level(0.95, 4), 4)
    0.9875
    >>> look_level(0.95, 1)
    0.95
    """
    if isinstance(looks, bool) or not isinstance(looks, int) or looks < 1:
        raise ConfigError(f"looks must be a positive whole number, got {looks!r}")
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be strictly between 0 and 1, got {level!r}")
    return 1.0 - (1.0 - level) / looks
