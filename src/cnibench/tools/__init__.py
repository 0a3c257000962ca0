"""Load and measurement tools: for each, an argv builder and an output parser (pure functions).

Each measurement tool's module also declares one :class:`~cnibench.tools.registry.MeasurementTool`
(its package, version probe and, for a client tool, how one baseline measurement runs), and one
:func:`~cnibench.tools.registry.register` line below adds it: a new tool is that module and that
line (``tests/lab/test_lab_toy_tool.py`` does it with a tool defined in the tests).

Backends run the argv (``Endpoint.run``) and hand the output back to the parser; nothing in
this package starts a process, except the two runner modules that *are* processes
(``python -m cnibench.tools.iperf3_server`` and ``python -m cnibench.tools.locust_runner``),
and :class:`InProcessIperf3Server`, which starts the former on this host.

Parsers raise :class:`cnibench.errors.ToolError` when the tool reported a failure and
:class:`cnibench.errors.ParseError` when its output cannot be understood; both keep the
output in ``error.output``. Captured real outputs for every parser live in ``fixtures/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cnibench._lazy import lazy_exports
from cnibench.tools.ab import AB, AbConnectionTimes, AbResult, ab_argv, parse_ab
from cnibench.tools.http_timing import (
    CURL,
    HttpSample,
    HttpTimingResult,
    http_timing_argv,
    parse_http_timing,
)
from cnibench.tools.iperf3 import (
    IPERF3,
    Iperf3Interval,
    Iperf3Json,
    Iperf3Result,
    iperf3_client_argv,
    iperf3_server_argv,
    parse_iperf3,
)
from cnibench.tools.registry import (
    TOOLS,
    ClientMeasurement,
    MeasurementTool,
    ToolTarget,
    VersionProbe,
    client_tools,
    debian_packages,
    register,
    tool_names,
    unregister,
)
from cnibench.tools.sockperf import (
    SOCKPERF,
    SockperfResult,
    parse_sockperf,
    sockperf_pingpong_argv,
    sockperf_server_argv,
)
from cnibench.tools.wrk import WRK, WrkErrors, WrkResult, parse_wrk, wrk_argv

# The measurement tools, one line each; their order is the baseline's condition order and the
# offline tools image's package order (see registry.debian_packages).
register(IPERF3)
register(SOCKPERF)
register(WRK)
register(AB)
register(CURL)

if TYPE_CHECKING:
    from cnibench.tools.iperf3_server import (
        InProcessIperf3Server,
        Iperf3ServerRecord,
        iperf3_server_process_argv,
        iperf3_server_record_from_json,
        parse_iperf3_server_output,
        parse_iperf3_server_record,
    )
    from cnibench.tools.locust_runner import (
        LocustRun,
        LocustSummary,
        locust_runner_argv,
        parse_locust_records,
        parse_locust_summary,
    )

# The two runner modules are also programs (``python -m cnibench.tools.<module>``). Importing
# them here eagerly would load them twice when run that way (runpy warns about it), so their
# names are resolved on first use instead.
_MODULE_OF = {
    "InProcessIperf3Server": "iperf3_server",
    "Iperf3ServerRecord": "iperf3_server",
    "iperf3_server_process_argv": "iperf3_server",
    "iperf3_server_record_from_json": "iperf3_server",
    "parse_iperf3_server_output": "iperf3_server",
    "parse_iperf3_server_record": "iperf3_server",
    "LocustRun": "locust_runner",
    "LocustSummary": "locust_runner",
    "locust_runner_argv": "locust_runner",
    "parse_locust_records": "locust_runner",
    "parse_locust_summary": "locust_runner",
}

__getattr__ = lazy_exports(__name__, _MODULE_OF)


__all__ = [
    "TOOLS",
    "AbConnectionTimes",
    "AbResult",
    "ClientMeasurement",
    "HttpSample",
    "HttpTimingResult",
    "InProcessIperf3Server",
    "Iperf3Interval",
    "Iperf3Json",
    "Iperf3Result",
    "Iperf3ServerRecord",
    "LocustRun",
    "LocustSummary",
    "MeasurementTool",
    "SockperfResult",
    "ToolTarget",
    "VersionProbe",
    "WrkErrors",
    "WrkResult",
    "ab_argv",
    "client_tools",
    "debian_packages",
    "http_timing_argv",
    "iperf3_client_argv",
    "iperf3_server_argv",
    "iperf3_server_process_argv",
    "iperf3_server_record_from_json",
    "locust_runner_argv",
    "parse_ab",
    "parse_http_timing",
    "parse_iperf3",
    "parse_iperf3_server_output",
    "parse_iperf3_server_record",
    "parse_locust_records",
    "parse_locust_summary",
    "parse_sockperf",
    "parse_wrk",
    "register",
    "sockperf_pingpong_argv",
    "sockperf_server_argv",
    "tool_names",
    "unregister",
    "wrk_argv",
]
