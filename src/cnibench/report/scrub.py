"""Last line of defence against secrets in a rendered report.

The results store already redacts the environment fingerprint (:func:`cnibench.results.redact`),
but a report renders text from many places (environment files written by older versions or by
hand, failure reasons that quote a tool's output, verification details). Every piece of text a
report shows passes through :func:`scrub_text`, and every mapping through :func:`scrub_mapping`.
Over-redaction is accepted: a harmless value that looks like a credential is lost rather than a
credential published.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from cnibench.results import REDACTED, redact

__all__ = ["environment_secrets", "scrub_mapping", "scrub_text"]

_SECRET_ENV_PREFIXES = ("ARM_", "AZURE_")
_SECRET_ENV_WORDS = ("SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "KUBECONFIG", "KEY")
_MIN_SECRET_LENGTH = 6
"""Shorter environment values (``1``, ``true``, ``eu``) are too common to replace blindly."""

_KEY_WORDS = (
    r"token|password|passwd|secret|credential|api[_-]?key|access[_-]?key|private[_-]?key"
    r"|client[_-]?key(?:[_-]?data)?|client[_-]?certificate(?:[_-]?data)?|certificate-authority-data"
    r"|auth(?:orization)?|kubeconfig|connection[_-]?string|sas|(?:ARM|AZURE)_[A-Z0-9_]+"
)
_PATTERNS: tuple[re.Pattern[str], ...] = (
    # PEM blocks of any kind of key.
    re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)",
        re.DOTALL,
    ),
    # HTTP credentials.
    re.compile(r"(?i)\b(?:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    # JSON Web Tokens (Kubernetes service-account tokens are JWTs).
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
)
# key: value, key=value, "key": "value" -- the value is replaced, the key is kept for context.
_KEY_VALUE = re.compile(
    r"(?i)(?P<key>[\"']?[A-Za-z0-9_.-]*(?:" + _KEY_WORDS + r")[A-Za-z0-9_.-]*[\"']?"
    r"\s*[:=]\s*)(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;}\]\"'&<]+)"
)


def environment_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Values of environment variables that hold credentials, longest first.

    Parameters
    ----------
    environ:
        The environment to look at; default :data:`os.environ`.

    Returns
    -------
    tuple of str
        Values (at least 6 characters) of variables starting with ``ARM_`` or ``AZURE_`` or
        whose name contains SECRET, TOKEN, PASSWORD, CREDENTIAL, KUBECONFIG or KEY.
    """
    source = os.environ if environ is None else environ
    found = {
        value
        for name, value in source.items()
        if len(value) >= _MIN_SECRET_LENGTH
        and (
            name.upper().startswith(_SECRET_ENV_PREFIXES)
            or any(word in name.upper() for word in _SECRET_ENV_WORDS)
        )
    }
    return tuple(sorted(found, key=len, reverse=True))


def _replace_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if value.strip("\"'") in ("", REDACTED):
        return match.group(0)
    return f"{match.group('key')}{REDACTED}"


def scrub_text(text: str, *, secrets: tuple[str, ...] | None = None) -> str:
    """``text`` with everything that looks like a credential replaced by ``"<redacted>"``.

    Parameters
    ----------
    text:
        Any text a report is about to show (a failure reason, a JSON dump, a detail line).
    secrets:
        Literal values to remove wherever they appear; default :func:`environment_secrets`.

    Returns
    -------
    str
        The scrubbed text: literal secret values, PEM private keys, ``Bearer``/``Basic``
        credentials, JSON Web Tokens and the values of ``key: value`` / ``key=value`` pairs
        whose key names a credential (token, password, secret, client-key-data, ``ARM_*``,
        ``AZURE_*``, ...) are replaced.
    """
    for value in environment_secrets() if secrets is None else secrets:
        text = text.replace(value, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(REDACTED, text)
    return _KEY_VALUE.sub(_replace_value, text)


def _scrub_any(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, Mapping):
        return {key: _scrub_any(item, secrets) for key, item in redact(value).items()}
    if isinstance(value, list | tuple):
        return [_scrub_any(item, secrets) for item in value]
    if isinstance(value, str):
        return scrub_text(value, secrets=secrets)
    return value


def scrub_mapping(
    mapping: Mapping[str, Any], *, secrets: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """Redact a mapping by key (:func:`cnibench.results.redact`) and scrub every string in it.

    Parameters
    ----------
    mapping:
        E.g. the ``cni_values`` or ``nodes`` of an environment fingerprint.
    secrets:
        As for :func:`scrub_text`.

    Returns
    -------
    dict
        A new mapping; ``mapping`` is not modified.
    """
    chosen = environment_secrets() if secrets is None else secrets
    result: dict[str, Any] = _scrub_any(mapping, chosen)
    return result
