"""The regression gate's answer as JUnit XML (``cnibench compare --junit FILE``), one test case
per gated (condition, metric), for the test reports of CI systems.

How each answer is written:

* **within threshold**: a passing test case (its ratio and interval in ``<system-out>``);
* **regressed, failed runs, missing**: ``<failure type="regressed|failed-runs|missing">`` with
  the line ``cnibench compare`` prints on stderr as its message;
* **undecided**: ``<error type="undecided">`` whose message starts ``UNDECIDED`` and says what
  would decide it. Not ``<skipped>``: GitHub's JUnit reporters, GitLab and Jenkins show a
  skipped test as neutral (grey, often folded away), so a gate that did not decide, and
  made the job fail with exit 3, would look as if nothing needed attention. Not a plain
  ``<failure>`` either: that reads as a regression. An error is shown as clearly as a failure
  (red in every one of them) and counted apart from failures (the ``errors`` attribute;
  GitLab's "error" status), which is what JUnit means by it: the test could not reach a
  verdict;
* **missing but allowed** (``--allow-missing``): ``<skipped>``, since it is deliberately not
  gated.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from cnibench.report.gate.directions import format_threshold
from cnibench.report.gate.loading import condition_labels
from cnibench.report.gate.verdicts import Answer, Verdict
from cnibench.report.scrub import scrub_text

if TYPE_CHECKING:
    from cnibench.report.gate.rendering import ResultComparison

__all__ = ["comparison_junit"]

_FAILURE_TYPES = {
    Verdict.FAILED_RUNS.value: "failed-runs",
    Verdict.MISSING.value: "missing",
}
"""The ``type`` of a failure that is not a regression of the ratio (``"regressed"``)."""


def _case(suite: ET.Element, label: str, metric: str) -> ET.Element:
    """A test case named by the metric, its class the condition (``scenario.cni.condition``, so
    a CI report groups a condition's metrics)."""
    condition, _, parameters = label.partition(" ")
    name = f"{metric} {parameters}" if parameters else metric
    return ET.SubElement(
        suite, "testcase", classname=condition.replace("/", "."), name=name, time="0"
    )


def comparison_junit(comparison: ResultComparison) -> str:
    """The comparison as one JUnit ``<testsuite>`` (inside ``<testsuites>``), as text.

    Parameters
    ----------
    comparison:
        The gate's comparison.

    Returns
    -------
    str
        XML with a declaration: one ``<testcase>`` per row of the comparison (see the module
        for how each answer is written) and one ``<skipped>`` case per metric the candidate
        lacks when missing ones are allowed; the suite's properties give the gate's answer,
        threshold, mode and false-alarm statement.
    """
    # The lines cnibench compare prints on stderr, in the rows' order, as the messages.
    regression_lines = iter(comparison.regression_lines())
    undecided_lines = iter(comparison.undecided_lines())
    root = ET.Element("testsuites", name="cnibench compare")
    suite = ET.SubElement(root, "testsuite", name="cnibench compare", time="0")
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("answer", comparison.answer.value),
        ("threshold", format_threshold(comparison.threshold)),
        ("mode", comparison.mode.value),
        ("headline", comparison.headline()),
    ):
        ET.SubElement(properties, "property", name=name, value=scrub_text(value))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    level = f"{100.0 * comparison.level:g}%"
    for label, cell in zip(comparison.row_labels(), comparison.cells(), strict=True):
        case = _case(suite, label, cell["metric"])
        counts["tests"] += 1
        summary = (
            f"{cell['verdict']}: ratio {cell['ratio']} ({level} CI {cell['ci']}), baseline"
            f" {cell['baseline']}, candidate {cell['candidate']}, n = {cell['n']}"
        )
        details = "\n".join(part for part in (summary, cell["note"]) if part)
        if cell["regression"]:
            kind = _FAILURE_TYPES.get(cell["verdict"], "regressed")
            element = ET.SubElement(case, "failure", type=kind, message=next(regression_lines))
            element.text = scrub_text(details)
            counts["failures"] += 1
        elif cell["answer"] == Answer.UNDECIDED:
            element = ET.SubElement(case, "error", type="undecided", message=next(undecided_lines))
            element.text = scrub_text(details)
            counts["errors"] += 1
        else:
            ET.SubElement(case, "system-out").text = scrub_text(f"within threshold; {summary}")
    labels = condition_labels(list(dict.fromkeys(key for key, _ in comparison.missing)))
    for key, metric in comparison.missing:
        case = _case(suite, labels[key], metric)
        message = "missing in the candidate: not gated (--allow-missing)"
        ET.SubElement(case, "skipped", message=message)
        counts["tests"] += 1
        counts["skipped"] += 1
    for element in (root, suite):
        for name, count in counts.items():
            element.set(name, str(count))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
