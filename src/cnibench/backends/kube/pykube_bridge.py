"""A pykube-ng client for the same cluster and credentials as a kubernetes ``ApiClient``.

cnibench does all its own API work with the official client; pykube-ng is offered on the
``cluster`` fixture (``cluster.pykube``) for users of pytest-kind-style APIs. Building it from
the official client's configuration, rather than from a kubeconfig file, means it works for every
provider the same way (kind, AKS, existing, an injected client) and never writes credentials to
disk: certificate paths are the ones the official client already uses, and a bearer token stays
in memory.
"""

from __future__ import annotations

from typing import Any

__all__ = ["pykube_client"]


def _bearer_token(configuration: Any) -> str:
    api_key = dict(getattr(configuration, "api_key", None) or {})
    prefixes = dict(getattr(configuration, "api_key_prefix", None) or {})
    value = str(api_key.get("authorization") or api_key.get("BearerToken") or "")
    if not value:
        return ""
    prefix = str(prefixes.get("authorization") or "")
    full = f"{prefix} {value}" if prefix else value
    scheme, _, token = full.partition(" ")
    return token if scheme.lower() == "bearer" and token else ""


def pykube_client(api_client: Any, *, timeout: float = 30.0) -> Any:
    """A :class:`pykube.HTTPClient` talking to ``api_client``'s server as the same user.

    Parameters
    ----------
    api_client:
        A :class:`kubernetes.client.ApiClient`.
    timeout:
        Request timeout in seconds.

    Returns
    -------
    pykube.HTTPClient
        Server, CA, client certificate and bearer token taken from the client's configuration.
    """
    import pykube

    configuration = api_client.configuration
    cluster: dict[str, Any] = {"server": configuration.host}
    if not configuration.verify_ssl:
        cluster["insecure-skip-tls-verify"] = True
    elif configuration.ssl_ca_cert:
        cluster["certificate-authority"] = configuration.ssl_ca_cert
    user: dict[str, Any] = {}
    if configuration.cert_file and configuration.key_file:
        user["client-certificate"] = configuration.cert_file
        user["client-key"] = configuration.key_file
    token = _bearer_token(configuration)
    if token:
        user["token"] = token
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cnibench", "cluster": cluster}],
        "users": [{"name": "cnibench", "user": user}],
        "contexts": [{"name": "cnibench", "context": {"cluster": "cnibench", "user": "cnibench"}}],
        "current-context": "cnibench",
    }
    return pykube.HTTPClient(pykube.KubeConfig(doc), timeout=timeout)
