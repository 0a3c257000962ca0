"""The effect probe: when a change (a policy, a new Service) came into force, to 10 ms.

A change a CNI makes is timed from inside the client: one command started once (not one exec
per attempt) opens a new TCP connection to ``host:port`` every ``interval`` seconds, sends one
HTTP/1.0 GET and prints a line per attempt: when it started on the host's monotonic clock
(``CLOCK_MONOTONIC``, ns: the clock :func:`time.monotonic` reads, shared by every network
namespace and every container of one kernel), when it ended, and what came of it (answered
with a status and the first word of the body, which cnibench's HTTP echo makes its pod's
name; refused; unreachable; timed out; reset). Attempts overlap: each waits up to
``attempt_timeout`` for its answer while the next ones start on time, so a dropped SYN does
not stretch the spacing, and each is a new connection (a new source port), so conntrack holds
no earlier verdict for it.

The command is Perl with only the modules of ``perl-base``, which is Essential in Debian: the
lab's namespaces (this host's tools) and cnibench's tools image (Debian minbase, no Python)
both have it, and its one loop costs far less CPU than a process per attempt would. The clock
is read with the ``clock_gettime`` system call (``perl-base`` has no ``Time::HiRes``; it is
used where the architecture's call number is not known here).

The loop bounds itself: it stops starting attempts after ``max_seconds`` or ``max_attempts``,
or once ``stop_after`` consecutive attempts showed the change in force, and ends when the last
one has finished. Its first line names its PID, so whoever started it can end it by PID.

:func:`effect_probe_argv` builds the command, :func:`parse_effect_probe` reads its output and
:func:`time_to_effect` reads the time to effect from the attempts: the start of the first of
``consecutive`` attempts in a row that show the change, counted from the change's
acknowledgment (an API server's answer; on the lab, the rules loaded), and the attempts that
*leaked* meanwhile (answered while the change says blocked, or answered by another backend).
"""

from __future__ import annotations

import enum
import itertools
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from cnibench.errors import ConfigError, ParseError
from cnibench.tools._common import format_number, require_positive

__all__ = [
    "ATTEMPT_TIMEOUT",
    "EFFECT_PROBE_SCRIPT",
    "PROBE_INTERVAL",
    "Effect",
    "EffectTiming",
    "ProbeAttempt",
    "ProbeLog",
    "ProbeOutcome",
    "ProbeStart",
    "effect_probe_argv",
    "parse_effect_probe",
    "parse_probe_start",
    "time_to_effect",
]

TOOL = "effect-probe"
PROBE_INTERVAL = 0.010
"""Seconds between the starts of two attempts (what the probe aims at; the log says what it
kept)."""
ATTEMPT_TIMEOUT = 0.5
"""Seconds an attempt waits for its answer before it counts as timed out: under the kernel's
first SYN retransmission (1 s), so one attempt is one SYN and its outcome is the state of the
data path when it started."""

EFFECT_PROBE_SCRIPT = r"""
use strict;
use warnings;
use Errno qw(EINPROGRESS EAGAIN ECONNREFUSED EHOSTUNREACH ENETUNREACH ECONNRESET);
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);
use POSIX ();
use Socket qw(AF_INET AF_INET6 SOCK_STREAM SOL_SOCKET SO_ERROR inet_pton
              pack_sockaddr_in pack_sockaddr_in6);

my ($host, $port, $interval_ms, $timeout_ms, $max_ms, $max_n, $stop_n, $stop_on) = @ARGV;
$| = 1;

my %CLOCK_GETTIME = (x86_64 => 228, aarch64 => 113, arm64 => 113, riscv64 => 113);
my $nr = $CLOCK_GETTIME{(POSIX::uname())[4]};
my ($now, $source);
if (defined $nr) {
    $source = "syscall";
    $now = sub {
        my $ts = "\0" x 16;
        syscall($nr, 1, $ts) == 0 or die "clock_gettime: $!\n";
        my ($s, $ns) = unpack("q q", $ts);
        return $s * 1_000_000_000 + $ns;
    };
} elsif (eval { require Time::HiRes; 1 }) {
    $source = "hires";
    $now = sub { int(Time::HiRes::clock_gettime(1) * 1e9) };
} else {
    die "no monotonic clock on this architecture\n";
}

my $family = $host =~ /:/ ? AF_INET6 : AF_INET;
my $packed = inet_pton($family, $host) or die "not an address: $host\n";
my $address = $family == AF_INET6 ? pack_sockaddr_in6($port, $packed)
                                  : pack_sockaddr_in($port, $packed);
my $request = "GET / HTTP/1.0\r\nHost: $host\r\nConnection: close\r\n\r\n";
my ($interval, $timeout) = ($interval_ms * 1e6, $timeout_ms * 1e6);

my (%live, @effective, @held);
my ($seq, $contiguous, $streak, $launching, $reason, $told) = (0, 0, 0, 1, "", 0);
my $start = $now->();
my $next = $start;

# Lines wait until the start line is out: the caller reads that line first.
sub out { if ($told) { print @_ } else { push @held, @_ } }

sub effective {
    my ($outcome, $detail) = @_;
    return $outcome =~ /^(refused|timeout|unreachable)$/ if $stop_on eq "blocked";
    return $outcome eq "answered" && $detail eq "200 $1" if $stop_on =~ /^answered=(.*)$/;
    if ($stop_on =~ /^answered!=(.*)$/) {
        my $old = $1;
        return $outcome eq "answered" && $detail =~ /^200 \S/ && $detail ne "200 $old";
    }
    return 0;
}

sub finish {
    my ($attempt, $outcome, $detail) = @_;
    delete $live{fileno $attempt->{sock}};
    close $attempt->{sock};
    my $end = $now->();
    out(join(" ", "a", $attempt->{seq}, $attempt->{t0}, $end, $outcome, $detail // ()), "\n");
    $effective[$attempt->{seq}] = effective($outcome, $detail // "") ? 1 : 0;
    while ($contiguous < $seq && defined $effective[$contiguous]) {
        $streak = $effective[$contiguous++] ? $streak + 1 : 0;
    }
    if ($launching && $stop_n > 0 && $streak >= $stop_n) { $launching = 0; $reason = "effect" }
}

sub failed {
    my ($attempt, $errno) = @_;
    my $outcome = $errno == ECONNREFUSED ? "refused"
        : ($errno == EHOSTUNREACH || $errno == ENETUNREACH) ? "unreachable"
        : $errno == ECONNRESET ? "reset" : "error";
    finish($attempt, $outcome, $outcome eq "error" ? "errno$errno" : undef);
}

sub send_request {
    my ($attempt) = @_;
    $attempt->{state} = "read";
    defined syswrite($attempt->{sock}, $request) or failed($attempt, $! + 0);
}

sub launch {
    my $t0 = $now->();
    my $attempt = {seq => $seq++, t0 => $t0, deadline => $t0 + $timeout, buf => ""};
    socket(my $sock, $family, SOCK_STREAM, 0) or do {
        out("a $attempt->{seq} $t0 $t0 error socket\n");
        $effective[$attempt->{seq}] = 0;
        return;
    };
    fcntl($sock, F_SETFL, fcntl($sock, F_GETFL, 0) | O_NONBLOCK);
    $attempt->{sock} = $sock;
    $live{fileno $sock} = $attempt;
    if (connect($sock, $address)) { send_request($attempt) }
    elsif ($! == EINPROGRESS) { $attempt->{state} = "connect" }
    else { failed($attempt, $! + 0) }
}

# The first attempt is on its way before the start line tells the caller the probe runs, so
# a change the caller makes on that line comes after at least one attempt of the old state.
launch();
$next += $interval;
print "start $$ $start $source\n";
$told = 1;
print @held;

while (1) {
    my $t = $now->();
    if ($launching && $t - $start >= $max_ms * 1e6) { $launching = 0; $reason = "time" }
    if ($launching && $seq >= $max_n) { $launching = 0; $reason = "count" }
    if ($launching && $t >= $next) {
        launch();
        $next += $interval;
        $next = $t + $interval if $next <= $t;
    }
    last if !$launching && !%live;
    my ($rin, $win) = ("", "");
    my $wake = $launching ? $next : undef;
    for my $attempt (values %live) {
        vec($attempt->{state} eq "connect" ? $win : $rin, fileno $attempt->{sock}, 1) = 1;
        $wake = $attempt->{deadline} if !defined $wake || $attempt->{deadline} < $wake;
    }
    my $wait = ($wake - $now->()) / 1e9;
    my ($rout, $wout) = ($rin, $win);
    select($rout, $wout, undef, $wait > 0 ? $wait : 0);
    $t = $now->();
    for my $attempt (values %live) {
        my $fd = fileno $attempt->{sock};
        if ($attempt->{state} eq "connect" && vec($wout, $fd, 1)) {
            my $errno = unpack("i", getsockopt($attempt->{sock}, SOL_SOCKET, SO_ERROR));
            $errno ? failed($attempt, $errno) : send_request($attempt);
        } elsif ($attempt->{state} eq "read" && vec($rout, $fd, 1)) {
            my $got = sysread($attempt->{sock}, $attempt->{buf}, 4096, length $attempt->{buf});
            if (!defined $got) { failed($attempt, $! + 0) unless $! == EAGAIN }
            elsif ($got == 0 || length $attempt->{buf} > 65536) {
                my ($status) = $attempt->{buf} =~ m{^HTTP/\S+ (\d{3})};
                my (undef, $body) = split /\r?\n\r?\n/, $attempt->{buf}, 2;
                my ($who) = ($body // "") =~ /^(\S+)/;
                finish($attempt, "answered", join(" ", $status // "000", $who // "-"));
            }
        } elsif ($t >= $attempt->{deadline}) {
            finish($attempt, "timeout");
        }
    }
}
print "end $reason $seq\n";
"""
"""The probe loop (Perl, ``perl-base`` only). Arguments: host, port, interval (ms), attempt
timeout (ms), the most milliseconds and attempts, the consecutive attempts in force that end
it (0: never) and what is in force (``blocked`` or ``answered=<name>``). Output: ``start <pid>
<ns> <clock>``, one ``a <seq> <start ns> <end ns> <outcome> [<status> <name> | errno<n>]`` per
attempt as it ends, and ``end <why> <attempts>`` (``effect``, ``time`` or ``count``)."""


class ProbeOutcome(enum.StrEnum):
    """What one attempt of the effect probe came to."""

    ANSWERED = "answered"
    """An HTTP answer arrived (any status)."""
    REFUSED = "refused"
    """The connection was refused (a RST, or an ICMP port unreachable)."""
    UNREACHABLE = "unreachable"
    """An ICMP host or network unreachable (or administratively prohibited) came back."""
    TIMEOUT = "timeout"
    """Nothing came back within the attempt's timeout (dropped)."""
    RESET = "reset"
    """The connection was reset after it was set up."""
    ERROR = "error"
    """Any other failure (no socket, another errno)."""


BLOCKED = frozenset({ProbeOutcome.REFUSED, ProbeOutcome.UNREACHABLE, ProbeOutcome.TIMEOUT})
"""Outcomes of a connection the data path did not let through."""


@dataclass(frozen=True)
class ProbeAttempt:
    """One attempt of the effect probe.

    Attributes
    ----------
    seq:
        Its number (0-based, in the order started).
    start, end:
        When it started and ended, monotonic seconds on the probe's clock.
    outcome:
        What came of it.
    status:
        The HTTP status of an answer (``0``: an answer without a status line).
    answered_by:
        The first word of the answer's body (cnibench's HTTP echo writes its pod's name).
    detail:
        The errno of an ``error`` outcome.
    """

    seq: int
    start: float
    end: float
    outcome: ProbeOutcome
    status: int | None = None
    answered_by: str = ""
    detail: str = ""

    @property
    def blocked(self) -> bool:
        """Whether the data path did not let it through (refused, unreachable, timed out)."""
        return self.outcome in BLOCKED


@dataclass(frozen=True)
class ProbeStart:
    """The probe's first line: its PID and when it started on its clock (seconds)."""

    pid: int
    started: float
    clock: str


@dataclass(frozen=True)
class ProbeLog:
    """Everything the effect probe printed, parsed.

    Attributes
    ----------
    start:
        Its first line.
    attempts:
        Every attempt that ended, in the order started.
    ended:
        Why it stopped starting attempts (``effect``, ``time``, ``count``); ``""`` when its
        output ends without saying so (it was stopped).
    """

    start: ProbeStart
    attempts: tuple[ProbeAttempt, ...]
    ended: str

    def intervals(self) -> list[float]:
        """Seconds between the starts of consecutive attempts."""
        starts = [attempt.start for attempt in self.attempts]
        return [later - earlier for earlier, later in itertools.pairwise(starts)]


def _one_word(value: str, what: str) -> str:
    """``value``, which the probe compares with the first word of a body: one word.

    Raises
    ------
    cnibench.errors.ConfigError
        ``value`` is empty or has white space.
    """
    if not value or value.split() != [value]:
        raise ConfigError(f"{TOOL}: {what} is one word, got {value!r}")
    return value


@dataclass(frozen=True)
class Effect:
    """What an attempt shows once a change is in force.

    Use :meth:`blocking` (a policy denies the probe's flow), :meth:`answering` (a Service
    answers, by the named backend) or :meth:`answering_other_than` (an egress gateway: the
    external host's :mod:`~cnibench.tools.source_echo` names another source than before).
    """

    blocked: bool = False
    answered_by: str = ""
    not_answered_by: str = ""

    @classmethod
    def blocking(cls) -> Effect:
        """In force when the connection is refused, unreachable or timed out."""
        return cls(blocked=True)

    @classmethod
    def answering(cls, name: str) -> Effect:
        """In force when ``name`` answers with HTTP 200.

        Raises
        ------
        cnibench.errors.ConfigError
            ``name`` is empty or has white space (the probe reads the body's first word).
        """
        return cls(answered_by=_one_word(name, "a backend name"))

    @classmethod
    def answering_other_than(cls, old: str) -> Effect:
        """In force when an HTTP 200 names anyone but ``old`` (what answered before the
        change: an egress gateway takes over the client node's address).

        Raises
        ------
        cnibench.errors.ConfigError
            ``old`` is empty or has white space.
        """
        return cls(not_answered_by=_one_word(old, "what answered before"))

    @property
    def stop_on(self) -> str:
        """How the probe's stop rule names it."""
        if self.blocked:
            return "blocked"
        if self.not_answered_by:
            return f"answered!={self.not_answered_by}"
        return f"answered={self.answered_by}"

    def holds(self, attempt: ProbeAttempt) -> bool:
        """Whether ``attempt`` shows the change in force."""
        if self.blocked:
            return attempt.blocked
        answered = attempt.outcome is ProbeOutcome.ANSWERED and attempt.status == 200
        if self.not_answered_by:
            return answered and attempt.answered_by not in ("", self.not_answered_by)
        return answered and attempt.answered_by == self.answered_by

    def leaks(self, attempt: ProbeAttempt) -> bool:
        """Whether ``attempt`` got through in a way the change rules out: answered at all
        while the change blocks, answered by another backend (or with another status), or
        still answered for the old source (a request that left un-masqueraded)."""
        return attempt.outcome is ProbeOutcome.ANSWERED and not self.holds(attempt)


def effect_probe_argv(
    host: str,
    port: int,
    *,
    effect: Effect,
    max_seconds: float,
    interval: float = PROBE_INTERVAL,
    attempt_timeout: float = ATTEMPT_TIMEOUT,
    max_attempts: int | None = None,
    stop_after: int = 50,
) -> list[str]:
    """The effect probe's command: ``perl -e <script> <arguments>``.

    Parameters
    ----------
    host, port:
        Where each attempt connects (an IPv4 or IPv6 address, not a name).
    effect:
        What the change shows once in force (the stop rule's).
    max_seconds:
        Seconds after which no attempt starts.
    interval:
        Seconds between the starts of two attempts.
    attempt_timeout:
        Seconds an attempt waits for its answer.
    max_attempts:
        The most attempts; default as many as ``max_seconds`` has intervals, plus one.
    stop_after:
        Consecutive attempts showing the change after which the probe stops (0: never).

    Raises
    ------
    cnibench.errors.ConfigError
        A non-positive duration or count, or a port out of range.
    """
    for name, value in (
        ("max_seconds", max_seconds),
        ("interval", interval),
        ("attempt_timeout", attempt_timeout),
    ):
        require_positive(value, tool=TOOL, name=name)
    if not 0 < port < 65536:
        raise ConfigError(f"{TOOL}: port {port} is out of range")
    if stop_after < 0:
        raise ConfigError(f"{TOOL}: stop_after must not be negative, got {stop_after}")
    attempts = math.ceil(max_seconds / interval) + 1 if max_attempts is None else max_attempts
    if attempts < 1:
        raise ConfigError(f"{TOOL}: max_attempts must be positive, got {attempts}")

    def ms(seconds: float) -> str:
        return format_number(round(seconds * 1000, 3))

    return [
        "perl",
        "-e",
        EFFECT_PROBE_SCRIPT,
        host,
        str(port),
        ms(interval),
        ms(attempt_timeout),
        ms(max_seconds),
        str(attempts),
        str(stop_after),
        effect.stop_on,
    ]


_START = re.compile(r"^start (\d+) (\d+) (\S+)$")
_ATTEMPT = re.compile(r"^a (\d+) (\d+) (\d+) ([a-z]+)(?: (.*))?$")
_END = re.compile(r"^end (\S*) (\d+)$")
_ANSWER = re.compile(r"^(\d{3}) (\S+)$")


def parse_probe_start(line: str) -> ProbeStart:
    """The probe's first line (``start <pid> <ns> <clock>``).

    Raises
    ------
    cnibench.errors.ParseError
        Any other line.
    """
    match = _START.match(line.strip())
    if match is None:
        raise ParseError(
            f"{TOOL}: expected 'start <pid> <ns> <clock>', got {line.strip()[:200]!r}",
            tool=TOOL,
            output=line,
        )
    return ProbeStart(int(match[1]), int(match[2]) / 1e9, match[3])


def parse_effect_probe(output: str) -> ProbeLog:
    """The attempts of one run of the effect probe, from its standard output.

    Lines it does not know are ignored (a runtime's own notices); attempts are ordered by their
    number (they end out of order when some time out).

    Raises
    ------
    cnibench.errors.ParseError
        The output has no start line, or an attempt line that does not parse.
    """
    start: ProbeStart | None = None
    attempts: list[ProbeAttempt] = []
    ended = ""
    for line in output.splitlines():
        line = line.strip()
        if line.startswith("start ") and start is None:
            start = parse_probe_start(line)
        elif line.startswith("a "):
            attempts.append(_attempt(line, output))
        elif (end := _END.match(line)) is not None:
            ended = end[1] or "?"
    if start is None:
        raise ParseError(
            f"{TOOL}: no start line in its output: {output.strip()[:200]!r}",
            tool=TOOL,
            output=output,
        )
    attempts.sort(key=lambda attempt: attempt.seq)
    return ProbeLog(start, tuple(attempts), ended)


def _attempt(line: str, output: str) -> ProbeAttempt:
    match = _ATTEMPT.match(line)
    try:
        if match is None:
            raise ValueError(line)
        outcome = ProbeOutcome(match[4])
    except ValueError:
        raise ParseError(
            f"{TOOL}: cannot read the attempt {line[:200]!r}", tool=TOOL, output=output
        ) from None
    status: int | None = None
    answered_by = detail = ""
    rest = match[5] or ""
    if outcome is ProbeOutcome.ANSWERED:
        answer = _ANSWER.match(rest)
        if answer is None:
            raise ParseError(
                f"{TOOL}: an answer without '<status> <name>': {line[:200]!r}",
                tool=TOOL,
                output=output,
            )
        status = int(answer[1])
        answered_by = "" if answer[2] == "-" else answer[2]
    else:
        detail = rest
    start, end = int(match[2]) / 1e9, int(match[3]) / 1e9
    return ProbeAttempt(int(match[1]), start, end, outcome, status, answered_by, detail)


@dataclass(frozen=True)
class EffectTiming:
    """When a change came into force, as the effect probe saw it.

    Attributes
    ----------
    seconds:
        From the change's acknowledgment to the start of the first of ``consecutive`` attempts
        in a row showing it (``None``: it never did, or not ``consecutive`` times in a row).
    consecutive:
        How many attempts in a row make the change in force.
    attempts:
        Attempts that ended.
    before:
        Attempts started before the acknowledgment.
    old_state:
        Of ``before``, those that did not show the change: the state it replaced, as seen.
        ``0`` makes ``seconds`` an upper bound (the probe started after the change, which may
        have come into force sooner).
    held_before_request:
        Attempts started before the change was even asked for that already showed it: a
        set-up that did not show the state the change replaces (``0`` when the request's
        time is not known).
    held_during_request:
        Attempts started between the request and its acknowledgment that showed the change:
        in force before it was acknowledged (the lab's rules hold the moment they are loaded).
    leaks:
        Attempts after the acknowledgment and before the effect that got through in a way the
        change rules out (answered while blocked, or by another backend).
    pending:
        Attempts after the acknowledgment and before the effect that neither leaked nor showed
        the change (no answer yet where one is expected).
    relapses:
        Attempts from the effect on that did not show the change.
    interval_median, interval_max:
        Seconds between the starts of consecutive attempts over the whole log (``None`` with
        fewer than two attempts): how much finer than the time it measures the probe is.
    """

    seconds: float | None
    consecutive: int
    attempts: int
    before: int
    old_state: int
    held_before_request: int
    held_during_request: int
    leaks: int
    pending: int
    relapses: int
    interval_median: float | None
    interval_max: float | None

    @property
    def upper_bound(self) -> bool:
        """Whether no attempt saw the state before the change (``seconds`` is then at most
        the time the change took)."""
        return self.old_state == 0


def time_to_effect(
    attempts: Sequence[ProbeAttempt],
    *,
    since: float,
    effect: Effect,
    consecutive: int = 3,
    requested: float | None = None,
) -> EffectTiming:
    """When ``effect`` came into force after ``since``: the start of the first of
    ``consecutive`` attempts in a row that show it, each started at or after ``since``.

    Parameters
    ----------
    attempts:
        The probe's attempts (ordered here by number).
    since:
        The change's acknowledgment, monotonic seconds on the probe's clock.
    effect:
        What an attempt shows once the change is in force.
    consecutive:
        Attempts in a row that make it in force (one attempt may slip through a rule being
        replaced; several in a row at 10 ms do not).
    requested:
        When the change was asked for (same clock, at most ``since``), if known.

    Raises
    ------
    ValueError
        ``consecutive`` below 1, or ``requested`` after ``since``.
    """
    if consecutive < 1:
        raise ValueError(f"consecutive must be at least 1, got {consecutive}")
    if requested is not None and requested > since:
        raise ValueError(f"the change was requested ({requested}) after its acknowledgment")
    ordered = sorted(attempts, key=lambda attempt: attempt.seq)
    before = [attempt for attempt in ordered if attempt.start < since]
    asked = since if requested is None else requested
    after = [attempt for attempt in ordered if attempt.start >= since]
    held = [effect.holds(attempt) for attempt in after]
    first: int | None = None
    for index in range(len(after) - consecutive + 1):
        if all(held[index : index + consecutive]):
            first = index
            break
    waiting = after[: len(after) if first is None else first]
    leaks = sum(effect.leaks(attempt) for attempt in waiting)
    starts = [attempt.start for attempt in ordered]
    intervals = [later - earlier for earlier, later in itertools.pairwise(starts)]
    held_before = [effect.holds(attempt) for attempt in before]
    return EffectTiming(
        seconds=None if first is None else after[first].start - since,
        consecutive=consecutive,
        attempts=len(ordered),
        before=len(before),
        old_state=held_before.count(False),
        held_before_request=sum(
            ok for attempt, ok in zip(before, held_before, strict=True) if attempt.start < asked
        ),
        held_during_request=sum(
            ok for attempt, ok in zip(before, held_before, strict=True) if attempt.start >= asked
        ),
        leaks=leaks,
        pending=len(waiting) - leaks,
        relapses=0 if first is None else held[first:].count(False),
        interval_median=statistics.median(intervals) if intervals else None,
        interval_max=max(intervals) if intervals else None,
    )
