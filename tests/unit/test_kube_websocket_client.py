"""Exec and port-forward streams never touch the API client other threads share.

The kubernetes client's ``stream``/``portforward`` swap ``call_api`` on the API client of the
method they are given while the websocket opens. Found on a real Cilium kind cluster: the
policy scenario's parallel probes left the session's shared client sending a plain DELETE as
a websocket ("Handshake status 200 OK"), so teardown failed.
"""

from __future__ import annotations

import threading
from typing import Any

from kubernetes import client
from kubernetes.stream.stream import _websocket_request

from cnibench.backends.kube.api import websocket_core_api


def test_a_stream_opening_leaves_the_shared_clients_call_api_alone() -> None:
    shared = client.ApiClient(client.Configuration(host="https://127.0.0.1:1"))
    original = shared.call_api
    opening, release = threading.Event(), threading.Event()
    seen_while_open: list[Any] = []

    def slow_websocket(configuration: Any, method: str, url: str, **kwargs: Any) -> str:
        opening.set()
        release.wait(10)
        return "done"

    def exec_in_thread() -> None:
        api = websocket_core_api(shared)
        _websocket_request(
            slow_websocket, None, api.connect_get_namespaced_pod_exec, "pod", "ns", command=["x"]
        )

    worker = threading.Thread(target=exec_in_thread)
    worker.start()
    assert opening.wait(10)
    seen_while_open.append(shared.call_api)  # what a concurrent DELETE would go through
    release.set()
    worker.join(10)
    assert seen_while_open == [original]
    assert shared.call_api == original


def test_the_stream_client_shares_the_configuration() -> None:
    configuration = client.Configuration(host="https://127.0.0.1:1")
    shared = client.ApiClient(configuration)
    api = websocket_core_api(shared)
    assert api.api_client is not shared
    assert api.api_client.configuration is configuration
