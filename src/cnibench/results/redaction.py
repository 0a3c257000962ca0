"""Secrets kept out of the results: which keys and values look like one, and :func:`redact`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "redact"]


REDACTED = "<redacted>"
"""What :func:`redact` puts in place of a secret."""


_SECRET_SUBSTRINGS = (
    "token",
    "password",
    "passwd",
    "secret",
    "credential",
    "privatekey",
    "apikey",
    "accesskey",
    "clientkey",
    "clientcertificate",
    "kubeconfig",
    "connectionstring",
)
_SECRET_WORDS = frozenset({"key", "pwd", "sas"})
_SECRET_PREFIXES = ("arm_", "azure_")
_WORD_SPLIT_RE = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _is_secret_key(key: str) -> bool:
    lowered = key.lower()
    if lowered.startswith(_SECRET_PREFIXES):
        return True
    compact = re.sub(r"[^a-z0-9]", "", lowered)
    if any(fragment in compact for fragment in _SECRET_SUBSTRINGS):
        return True
    words = {word.lower() for word in _WORD_SPLIT_RE.split(key) if word}
    return not words.isdisjoint(_SECRET_WORDS)


def _is_secret_text(text: str) -> bool:
    lowered = text.lower()
    if "private key-----" in lowered or "client-key-data" in lowered:
        return True
    # Every kubeconfig, YAML or JSON, has these three sections.
    return all(section in lowered for section in ("clusters", "contexts", "users"))


def _redact_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return redact(value)
    if isinstance(value, list | tuple):
        return [_redact_value(item) for item in value]
    if isinstance(value, str) and _is_secret_text(value):
        return REDACTED
    return value


def redact(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Copy of ``mapping`` with every secret-looking value replaced by ``"<redacted>"``.

    A value is replaced, at any nesting depth (mappings and lists), when its key looks like a
    secret (contains token, password, secret, credential, private/api/access/client key,
    client certificate, kubeconfig, connection string; has the word ``key``, ``pwd`` or
    ``sas``; starts with ``ARM_`` or ``AZURE_``, case-insensitive) or when the value itself looks
    like a secret (a PEM private key, or kubeconfig contents). Over-redaction is accepted: a
    harmless value under a suspicious key is lost rather than a secret written.

    Parameters
    ----------
    mapping:
        E.g. Helm values or backend options.

    Returns
    -------
    dict
        A new, redacted mapping; ``mapping`` is not modified.
    """
    return {
        str(key): REDACTED if _is_secret_key(str(key)) else _redact_value(value)
        for key, value in mapping.items()
    }
