"""The regression gate's A/A false-alarm rates, as ``bench/coverage.py`` measured them.

Written by ``python bench/coverage.py --sections gate --write-gate-rates``; do not edit by
hand. Each entry is one design: ``baselines`` A/A baseline sessions of ``runs`` runs each,
compared with one candidate session of as many runs, ``comparisons`` metric comparisons per
compared session. ``cnibench compare`` prints the entry of its design in its headline
(:func:`cnibench.report.compare.measured_false_alarm_rate`).
"""

from __future__ import annotations

MEASURED: tuple[dict[str, str | int | float], ...] = ()
