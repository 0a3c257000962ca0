"""``cluster.pykube``: a pykube-ng client built from the official client, on the real server."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from cnibench.backends.kube import render
from cnibench.backends.kube.api import Applier
from cnibench.backends.kube.pykube_bridge import pykube_client


@pytest.fixture
def labelled_namespace(api_client: Any) -> Iterator[str]:
    applier = Applier(api_client)
    manifest = render.namespace("cnibench-pykube", session="pk1")
    applier.apply(manifest)
    try:
        yield "cnibench-pykube"
    finally:
        applier.delete(manifest)


def test_pykube_sees_what_the_official_client_created(
    api_client: Any, labelled_namespace: str
) -> None:
    import pykube

    api = pykube_client(api_client)
    found = pykube.Namespace.objects(api).filter(selector={render.SESSION_LABEL: "pk1"})
    assert [ns.name for ns in found] == [labelled_namespace]


def test_pykube_carries_the_credentials(api_client: Any) -> None:
    """Without the same token the server refuses: the bridge does pass the real credentials."""
    import pykube
    from kubernetes import client

    configuration = copy.copy(api_client.configuration)
    configuration.api_key = {"authorization": "Bearer not-the-token"}
    configuration.api_key_prefix = {}
    wrong = pykube_client(client.ApiClient(configuration))
    with pytest.raises(pykube.exceptions.HTTPError) as refused:
        pykube.Namespace.objects(wrong).get(name="kube-system")
    assert refused.value.code == 401
    right = pykube_client(api_client)
    assert pykube.Namespace.objects(right).get(name="kube-system").name == "kube-system"


def test_pykube_verifies_the_server_certificate(api_client: Any, tmp_path: Any) -> None:
    """The bridge carries the CA file: trusting another CA makes the TLS handshake fail."""
    import subprocess

    import pykube
    import requests
    from kubernetes import client

    other_ca = tmp_path / "other-ca.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=not-the-apiserver", "-keyout", str(tmp_path / "k"),
         "-out", str(other_ca)],
        check=True, capture_output=True,
    )  # fmt: skip
    assert api_client.configuration.verify_ssl
    assert api_client.configuration.ssl_ca_cert
    configuration = copy.copy(api_client.configuration)
    configuration.ssl_ca_cert = str(other_ca)
    wrong = pykube_client(client.ApiClient(configuration))
    with pytest.raises(requests.exceptions.SSLError):
        pykube.Namespace.objects(wrong).get(name="kube-system")
