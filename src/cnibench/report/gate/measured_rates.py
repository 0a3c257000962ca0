"""The regression gate's A/A false-alarm rates, as ``bench/coverage.py`` measured them.

Written by ``python bench/coverage.py --sections gate --write-gate-rates``; do not edit by
hand. Each entry is one design: ``baselines`` A/A baseline sessions of ``runs`` runs each,
compared with one candidate session of as many runs, ``comparisons`` metric comparisons per
compared session. ``cnibench compare``'s headline computes the rate of the baselines at hand
(:func:`cnibench.report.gate.rates.stated_false_alarm_rate`); this table is what simulation
measured, to check it against (:func:`cnibench.report.gate.rates.measured_false_alarm_rate`
looks a design up). The entries of one baseline session predate the gate answering undecided
there: it no longer fails on them, it says it cannot decide.
"""

from __future__ import annotations

MEASURED: tuple[dict[str, str | int | float], ...] = (
    {
        "baselines": 1,
        "runs": 5,
        "rate": 0.507,
        "margin": 0.031,
        "simulations": 1000,
        "comparisons": 20,
        "session_sd": "8 % on rr_p99 and latency_p99, 1 % on the rest; run CV 5 %",
        "date": "2026-11-27",
        "machine": "vm (2 cores)",
    },
    {
        "baselines": 3,
        "runs": 5,
        "rate": 0.002,
        "margin": 0.0028,
        "simulations": 1000,
        "comparisons": 20,
        "session_sd": "8 % on rr_p99 and latency_p99, 1 % on the rest; run CV 5 %",
        "date": "2026-11-27",
        "machine": "vm (2 cores)",
    },
    {
        "baselines": 1,
        "runs": 3,
        "rate": 0.052,
        "margin": 0.0275,
        "simulations": 250,
        "comparisons": 20,
        "session_sd": "8 % on rr_p99 and latency_p99, 1 % on the rest; run CV 5 %",
        "date": "2026-11-27",
        "machine": "vm (2 cores)",
    },
    {
        "baselines": 1,
        "runs": 10,
        "rate": 0.852,
        "margin": 0.044,
        "simulations": 250,
        "comparisons": 20,
        "session_sd": "8 % on rr_p99 and latency_p99, 1 % on the rest; run CV 5 %",
        "date": "2026-11-27",
        "machine": "vm (2 cores)",
    },
    {
        "baselines": 2,
        "runs": 5,
        "rate": 0.004,
        "margin": 0.0078,
        "simulations": 250,
        "comparisons": 20,
        "session_sd": "8 % on rr_p99 and latency_p99, 1 % on the rest; run CV 5 %",
        "date": "2026-11-27",
        "machine": "vm (2 cores)",
    },
    {
        "baselines": 3,
        "runs": 3,
        "rate": 0.0,
        "margin": 0.0,
        "simulations": 250,
        "comparisons": 20,
        "session_sd": "8 % on rr_p99 and latency_p99, 1 % on the rest; run CV 5 %",
        "date": "2026-11-27",
        "machine": "vm (2 cores)",
    },
    {
        "baselines": 3,
        "runs": 10,
        "rate": 0.004,
        "margin": 0.0078,
        "simulations": 250,
        "comparisons": 20,
        "session_sd": "8 % on rr_p99 and latency_p99, 1 % on the rest; run CV 5 %",
        "date": "2026-11-27",
        "machine": "vm (2 cores)",
    },
    {
        "baselines": 5,
        "runs": 5,
        "rate": 0.008,
        "margin": 0.011,
        "simulations": 250,
        "comparisons": 20,
        "session_sd": "8 % on rr_p99 and latency_p99, 1 % on the rest; run CV 5 %",
        "date": "2026-11-27",
        "machine": "vm (2 cores)",
    },
)
