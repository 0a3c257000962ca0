"""The one exception tree of cnibench.

Every error cnibench raises on purpose derives from :class:`CnibenchError`, so a caller (the
CLI, the pytest plugin, a notebook) can catch one type and print a one-line message. Errors of
third-party libraries are wrapped with context (``raise ProvisioningError(...) from exc``).

Errors about bad *input* (a value the user typed or passed) also derive from :class:`ValueError`
so that ordinary Python code that validates with ``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = [
    "CnibenchError",
    "ConfigError",
    "InsufficientDataError",
    "MetricsError",
    "ParseError",
    "ProvisioningError",
    "ResultsError",
    "SetupError",
    "ToolError",
    "UnsupportedError",
    "VerificationError",
]


class CnibenchError(Exception):
    """Root of every error cnibench raises deliberately.

    ``str(error)`` is a single line meant for a person: it names the bad value or the failed
    step and, where it helps, what is allowed instead.
    """


class ConfigError(CnibenchError, ValueError):
    """A user-supplied option or parameter is invalid (exit code 2 on the command line)."""


class InsufficientDataError(CnibenchError, ValueError):
    """Statistics were asked of data that cannot support them (empty, NaN, too few values)."""


class ProvisioningError(CnibenchError):
    """A cluster, lab, namespace, link or process could not be created or removed."""


class ToolError(CnibenchError):
    """A load or measurement tool failed (non-zero exit, error report, timeout).

    Attributes
    ----------
    tool:
        Name of the tool, e.g. ``"iperf3"``.
    output:
        Whatever the tool printed, kept for the raw-output archive (may be empty).
    """

    def __init__(self, message: str, *, tool: str = "", output: str = "") -> None:
        super().__init__(message)
        self.tool = tool
        self.output = output


class ParseError(ToolError):
    """A tool's output could not be understood (garbage, truncated JSON, unknown format)."""


class AgentRestartedError(ToolError):
    """A CNI agent pod was replaced or restarted while a run measured: the run did not measure
    the datapath as it was set up, whatever its tool reported."""


class VerificationError(CnibenchError):
    """A scenario's set-up does not do what it claims; measuring it would be meaningless."""


class SetupError(VerificationError):
    """A condition's set-up could not be made (e.g. a pod never became Ready).

    Like a failed verification, it ends that condition with nothing measured and a failed
    record naming the reason; the session goes on with the next condition.
    """


class MetricsError(CnibenchError):
    """Prometheus could not be reached or a query returned no usable data."""


class ResultsError(CnibenchError):
    """A results directory or file is missing, unreadable or corrupted."""


class UnsupportedError(CnibenchError):
    """The cluster cannot run a scenario condition (a missing capability); the test is skipped."""
