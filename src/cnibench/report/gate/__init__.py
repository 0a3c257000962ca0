"""The regression gate behind ``cnibench compare`` and the plugin's ``--cnibench-compare-to``,
one module per job (its public names are re-exported by :mod:`cnibench.report.compare`):

* :mod:`~cnibench.report.gate.directions`: which metrics are gated, which way each gets better,
  where a 0 is impossible, and the syntax of the threshold and the session SD;
* :mod:`~cnibench.report.gate.verdicts`: the modes, verdicts and answers, the family-wise level;
* :mod:`~cnibench.report.gate.loading`: result sets, the runs the gate may use, how conditions
  match, and the candidate runs that failed;
* :mod:`~cnibench.report.gate.interval`: one comparison's ratio, interval, p-value, verdict and
  what would decide it;
* :mod:`~cnibench.report.gate.decision`: every comparison of two result sets, Holm over the
  session, the three-way answer, what the candidate lacks;
* :mod:`~cnibench.report.gate.rates`: the false-alarm rate for the baselines at hand, and
  (:mod:`~cnibench.report.gate.measured_rates`) what ``bench/coverage.py`` simulated;
* :mod:`~cnibench.report.gate.rendering`: :class:`ResultComparison`'s answer, headline,
  terminal table and lines, with :mod:`~cnibench.report.gate.markdown` (the pull-request
  comment) and :mod:`~cnibench.report.gate.junit` (the CI report);
* :mod:`~cnibench.report.gate.plan`: per-metric variance components, the test's variance and
  the budget plan of ``--plan``.

Layers within: ``directions`` and ``verdicts`` import nothing of the gate; ``loading`` imports
``directions``; ``plan`` those; ``interval`` ``plan``; ``rates`` ``interval``; ``rendering``
``rates`` (and ``markdown``/``junit`` when asked to render); ``decision`` all of them.
"""
