"""Short labels for figures and tables: only what differs between the things shown, wrapped.

A label is made of parts. A CNI configuration label is ``NAME`` or ``NAME:k=v,k=v`` (the
options its cluster ran with, e.g. ``"cilium:gateway=traefik,mode=kube-proxy"``); a context
string is parts separated by ``,`` or ``;`` (``"rules 1000 vs 0; clients=1, engine=iptables"``).
Next to each other, labels repeat what they share: every label of the kind study's policy
section ends in ``clients=1, ... placement=cross-node, rules_see=new-connections``. The
functions here keep the parts that tell the labels apart, so a reader sees the difference at
a glance; what they share is said once, elsewhere (a figure's title, a table's caption).

All functions are pure: text in, text out.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "RAN_AS",
    "common_parts",
    "distinct_labels",
    "feature_words",
    "scenario_words",
    "shorten_cni_labels",
    "wrap_label",
]

RAN_AS: Mapping[tuple[str, str, str], Mapping[str, str]] = {
    ("wireguard", "encryption", "lab"): {
        "kernel": "WireGuard (kernel module, lab)",
        "wireguard-go": "WireGuard (userspace wireguard-go)",
        "": "WireGuard (lab)",
    },
}
"""How a (scenario, feature) measured on a backend is named where the backend runs it as
something other than its name suggests, by what its sessions recorded as running it: the lab's
WireGuard is the kernel module where the host has one, else wireguard-go, a userspace process
over a TUN device, not the kernel module that a Kubernetes CNI's WireGuard uses, so its cost
is no estimate of a cluster's. Each session records which in its environment (the cni value
``wireguard_implementation``, :func:`cnibench.report.configs.recorded_implementation`); the
words under ``""`` claim neither, for sessions that recorded none (written before the lab
recorded it) or that recorded different ones."""


def _ran_as(words: Mapping[str, str], implementations: Iterable[object]) -> str:
    """The words for the one implementation every record names, else the words claiming none
    (an unknown implementation, or several). A value that is not a string (a table's missing
    value) names none, as ``""`` does."""
    recorded = {r if isinstance(r, str) else "" for r in implementations}
    return words.get(recorded.pop() if len(recorded) == 1 else "", words[""])


def scenario_words(
    scenario: str, backends: Iterable[str], *, implementations: Iterable[object] = ()
) -> str:
    """How a report names a scenario's section and figures: what ran (:data:`RAN_AS`) where
    every backend of its runs says the same, else the scenario's name.

    ``implementations`` are what the runs recorded as running the feature (``"kernel"``,
    ``"wireguard-go"``; ``""`` where a run recorded none): one implementation is named, none or
    several are not. ``scenario_words("wireguard", ["lab"], implementations=["wireguard-go"])``
    is ``"WireGuard (userspace wireguard-go)"``; without implementations it is ``"WireGuard
    (lab)"``."""
    recorded = list(implementations)
    named = {
        next(
            (
                _ran_as(words, recorded)
                for (s, _, b), words in RAN_AS.items()
                if s == scenario and b == backend
            ),
            "",
        )
        for backend in set(backends)
    }
    return named.pop() or scenario if len(named) == 1 else scenario


def feature_words(
    scenario: str, feature: str, backend: str, *, implementations: Iterable[object] = ()
) -> str:
    """What ran, where :data:`RAN_AS` says more than the feature's name (``""`` elsewhere), by
    what the treatment's runs recorded as running it (``implementations``, as for
    :func:`scenario_words`): ``feature_words("wireguard", "encryption", "lab",
    implementations=["kernel"])`` is ``"WireGuard (kernel module, lab)"``."""
    words = RAN_AS.get((scenario, feature, backend))
    return "" if words is None else _ran_as(words, implementations)


_SEPARATORS = ",;"
_OPENING = {"(": ")", "[": "]", "{": "}"}


@dataclass(frozen=True)
class _Parsed:
    """A label taken apart: its name (``""`` if none), its parts, and what followed each."""

    name: str
    parts: tuple[str, ...]
    separators: tuple[str, ...]
    """``separators[i]`` is the text after ``parts[i]`` (``", "``, ``";"``, ``""`` at the end)."""


def _is_name(text: str) -> bool:
    """A name is one word of no option syntax: ``cilium``, ``kube-router``."""
    return bool(text) and not any(c in text for c in "=,; ()[]{}\"'")


def _split_parts(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split ``text`` at ``,`` and ``;`` outside brackets and quotes (``weights={"v1": 60,
    "v2": 40}`` is one part)."""
    parts: list[str] = []
    separators: list[str] = []
    closing: list[str] = []
    quote = ""
    current: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in _OPENING:
            closing.append(_OPENING[char])
        elif closing and char == closing[-1]:
            closing.pop()
        elif char in _SEPARATORS and not closing:
            end = index + 1
            while end < len(text) and text[end] == " ":
                end += 1
            parts.append("".join(current).strip())
            separators.append(text[index:end])
            current = []
            index = end
            continue
        current.append(char)
        index += 1
    parts.append("".join(current).strip())
    separators.append("")
    kept = [(p, s) for p, s in zip(parts, separators, strict=True) if p]
    return tuple(p for p, _ in kept), tuple(s for _, s in kept)


def _parse(label: str) -> _Parsed:
    head, colon, rest = label.partition(":")
    if colon and _is_name(head):
        parts, separators = _split_parts(rest)
        return _Parsed(head, parts, separators)
    if _is_name(label):
        return _Parsed(label, (), ())
    parts, separators = _split_parts(label)
    return _Parsed("", parts, separators)


def _join(parsed: _Parsed, keep: Sequence[bool]) -> str:
    """The label again from its name and the parts marked in ``keep``; each kept part is
    followed by the separator it had (``";"`` stays ``";"``), the last by nothing."""
    chosen = [
        (part, separator)
        for part, separator, wanted in zip(parsed.parts, parsed.separators, keep, strict=True)
        if wanted
    ]
    body = "".join(part + separator for part, separator in chosen[:-1])
    if chosen:
        body += chosen[-1][0]
    body = body.rstrip()
    if not parsed.name:
        return body
    return f"{parsed.name}:{body}" if body else parsed.name


def _validate(labels: Sequence[str], width: int | None) -> None:
    if isinstance(labels, str):
        raise TypeError("labels must be a sequence of strings, not one string")
    wrong = [type(label).__name__ for label in labels if not isinstance(label, str)]
    if wrong:
        raise TypeError(f"labels must be strings; got {', '.join(dict.fromkeys(wrong))}")
    if width is not None and width < 1:
        raise ValueError(f"width must be a positive number of characters; got {width}")


def common_parts(labels: Sequence[str]) -> list[str]:
    """The parts every label has, in the order of the first label (names are not parts).

    Parameters
    ----------
    labels:
        CNI configuration labels or context strings (see the module notes).

    Returns
    -------
    list[str]
        What :func:`distinct_labels` leaves out, e.g. ``["clients=1", "placement=cross-node"]``
        to be said once in a title. Empty for fewer than two labels.

    Examples
    --------
    >>> common_parts(["clients=1, rules=0", "clients=1, rules=1000"])
    ['clients=1']
    """
    _validate(labels, None)
    if len(set(labels)) < 2:
        return []
    parsed = [_parse(label) for label in labels]
    shared = set(parsed[0].parts).intersection(*(set(p.parts) for p in parsed[1:]))
    return [part for part in dict.fromkeys(parsed[0].parts) if part in shared]


def wrap_label(text: str, width: int) -> str:
    """``text`` on lines of at most ``width`` characters, broken after ``,`` and ``;`` first.

    Parameters
    ----------
    text:
        A label; existing line breaks are kept.
    width:
        Most characters per line. A single part longer than that is broken at spaces
        (``textwrap``), never inside a word nor at its hyphens (``kube-proxy`` stays whole),
        so a line may still exceed ``width``.

    Returns
    -------
    str
        The lines joined with ``"\\n"``; trailing spaces at line ends are dropped.

    Examples
    --------
    >>> print(wrap_label("cilium:gateway=traefik,mode=kube-proxy", 24))
    cilium:gateway=traefik,
    mode=kube-proxy
    """
    if width < 1:
        raise ValueError(f"width must be a positive number of characters; got {width}")
    lines: list[str] = []
    for paragraph in text.split("\n"):
        lines.extend(_wrap_line(paragraph, width))
    return "\n".join(lines)


def _wrap_line(text: str, width: int) -> list[str]:
    # Pieces end after a separator (and the spaces following it), so lines break there.
    pieces: list[str] = []
    start = 0
    depth = 0
    for index, char in enumerate(text):
        if char in _OPENING:
            depth += 1
        elif char in _OPENING.values():
            depth = max(0, depth - 1)
        elif char in _SEPARATORS and depth == 0:
            end = index + 1
            while end < len(text) and text[end] == " ":
                end += 1
            pieces.append(text[start:end])
            start = end
    if start < len(text) or not pieces:
        pieces.append(text[start:])
    lines: list[str] = []
    current = ""
    for piece in pieces:
        if current and len((current + piece).rstrip()) > width:
            lines.append(current.rstrip())
            current = ""
        current += piece
    if current or not lines:
        lines.append(current.rstrip())
    wrapped: list[str] = []
    for line in lines:
        if len(line) <= width:
            wrapped.append(line)
        else:
            wrapped.extend(
                textwrap.wrap(line, width=width, break_long_words=False, break_on_hyphens=False)
                or [line]
            )
    return wrapped


def distinct_labels(labels: Sequence[str], *, width: int | None = None) -> list[str]:
    """Each label without the parts that every label shares, optionally wrapped.

    Parameters
    ----------
    labels:
        Labels made of parts: CNI configuration labels (``"cilium:napi=threaded"``: the name
        before ``:``, then options separated by ``,``) or context strings (``"clients=1,
        engine=iptables, placement=cross-node"``: parts separated by ``,`` or ``;``; a part
        may hold brackets or quotes with commas inside, such as ``weights={"v1": 60, "v2":
        40}``).
    width:
        If given, wrap each result to lines of at most this many characters
        (:func:`wrap_label`); ``None`` leaves it on one line.

    Returns
    -------
    list[str]
        One label per input, in order: the name is always kept; a part is dropped when every
        label has it (:func:`common_parts`). A context string whose parts are all shared
        becomes ``""``. Where two different inputs would come out the same, both keep their
        full text. A single label, or labels that are all equal, come back unchanged.

    Raises
    ------
    TypeError
        If ``labels`` is a string or holds something that is not.
    ValueError
        If ``width`` is below 1.

    Examples
    --------
    >>> distinct_labels(["clients=1, rules=0", "clients=1, rules=1000"])
    ['rules=0', 'rules=1000']
    >>> distinct_labels(["cilium:napi=threaded,mode=kube-proxy", "flannel:mode=kube-proxy"])
    ['cilium:napi=threaded', 'flannel']
    """
    _validate(labels, width)
    shared = set(common_parts(labels))
    parsed = [_parse(label) for label in labels]
    shortened = [_join(p, [part not in shared for part in p.parts]) for p in parsed]
    origins: dict[str, set[str]] = {}
    for label, short in zip(labels, shortened, strict=True):
        origins.setdefault(short, set()).add(label)
    result = [
        label if len(origins[short]) > 1 else short
        for label, short in zip(labels, shortened, strict=True)
    ]
    if width is not None:
        result = [wrap_label(label, width) for label in result]
    return result


def shorten_cni_labels(labels: Sequence[str]) -> dict[str, str]:
    """A short name per CNI configuration label: the name and the options that differ.

    Parameters
    ----------
    labels:
        CNI configuration labels, ``NAME`` or ``NAME:k=v,k=v`` (``"cilium:napi=threaded"``,
        ``"flannel"``), as in the results' ``cni`` column. Repeats are allowed.

    Returns
    -------
    dict[str, str]
        Every distinct label given, in order of first appearance, mapped to its short form:
        ``NAME`` always, then only the ``k=v`` items that not every label has, in their
        order, joined by ``,``. Where two labels would come out the same (the same items in
        another order), those two map to themselves.

    Raises
    ------
    TypeError
        If ``labels`` is a string or holds something that is not.

    Examples
    --------
    >>> shorten_cni_labels(["cilium:napi=threaded,mode=dsr", "flannel:mode=dsr"])
    {'cilium:napi=threaded,mode=dsr': 'cilium:napi=threaded', 'flannel:mode=dsr': 'flannel'}
    >>> shorten_cni_labels(["cilium:napi=threaded", "cilium"])
    {'cilium:napi=threaded': 'cilium:napi=threaded', 'cilium': 'cilium'}
    """
    _validate(labels, None)
    unique = list(dict.fromkeys(labels))
    return dict(zip(unique, distinct_labels(unique), strict=True))
