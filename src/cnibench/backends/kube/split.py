"""Traffic split on Kubernetes: a Gateway API HTTPRoute with weighted ``backendRefs``.

:class:`KubeSplit` puts one Service in front of each backend pod, a Gateway of the CNI's
Gateway API implementation (its ``gateway_class``) and an HTTPRoute splitting by weight, then
waits until the implementation has accepted the route at the weights asked for
(:func:`route_problem`) and the Gateway's address answers from this host, where the split load
comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cnibench.backends.base import Endpoint
from cnibench.backends.kube import render
from cnibench.backends.kube.runtime import KubeRuntime
from cnibench.errors import ProvisioningError, UnsupportedError
from cnibench.waiting import wait_for

__all__ = ["KubeSplit", "http_status", "route_problem"]

_SPLIT_GATEWAY = "cnibench-split"


def http_status(url: str) -> int:
    """HTTP status of one GET of ``url`` from this host (where the split load comes from), or 0
    when nothing answers in 2 s."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2.0) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (OSError, ValueError):
        return 0


def route_problem(route: Mapping[str, Any], weights: Mapping[str, int]) -> str:
    """What keeps an HTTPRoute (as the server stores it) from splitting as asked: backend
    weights other than ``weights`` (Service name -> weight), or a parent Gateway whose
    implementation has not set ``Accepted`` and ``ResolvedRefs`` to ``True``; ``""`` if
    nothing does.

    >>> route = {"spec": {"rules": [{"backendRefs": [{"name": "a", "weight": 3}]}]},
    ...          "status": {"parents": [{"conditions": [
    ...              {"type": "Accepted", "status": "True"},
    ...              {"type": "ResolvedRefs", "status": "True"}]}]}}
    >>> route_problem(route, {"a": 3})
    ''
    >>> route_problem(route, {"a": 2})
    "the route's weights are {'a': 3}, not {'a': 2}"
    """
    stored = {
        str(ref["name"]): int(ref.get("weight", 1))
        for rule in route.get("spec", {}).get("rules", [])
        for ref in rule.get("backendRefs", [])
    }
    if stored != dict(weights):
        return f"the route's weights are {stored}, not {dict(weights)}"
    parents = (route.get("status") or {}).get("parents") or []
    if not parents:
        return "no Gateway implementation has taken the route yet"
    for parent in parents:
        conditions = {c.get("type"): c for c in parent.get("conditions") or []}
        for kind in ("Accepted", "ResolvedRefs"):
            condition = conditions.get(kind, {})
            if condition.get("status") != "True":
                reason = condition.get("message") or condition.get("reason") or "not reported"
                return f"route {kind} is not True: {reason}"
    return ""


class KubeSplit:
    """The split objects of one session (Services, Gateway, HTTPRoute).

    Parameters
    ----------
    runtime:
        The cluster's shared state (CNI's gateway class, namespace, applier, timeouts).
    """

    def __init__(self, runtime: KubeRuntime) -> None:
        self._runtime = runtime
        self._objects: list[dict[str, Any]] = []

    def manifests(
        self, backends: Mapping[str, tuple[str, int]], *, port: int
    ) -> list[dict[str, Any]]:
        """Services, Gateway and HTTPRoute of a weighted split (``backends``: name to
        ``(pod name, weight)``).

        Raises
        ------
        cnibench.errors.UnsupportedError
            The CNI has no Gateway API implementation enabled.
        """
        rt = self._runtime
        if not rt.cni.gateway_class:
            raise UnsupportedError(f"{rt.cni.name} has no Gateway API implementation enabled")
        objects = [
            render.split_service(
                f"split-{name}",
                namespace=rt.namespace,
                session=rt.session,
                endpoint=pod_name,
                port=port,
            )
            for name, (pod_name, _) in backends.items()
        ]
        objects.append(
            render.gateway(
                _SPLIT_GATEWAY,
                namespace=rt.namespace,
                session=rt.session,
                gateway_class=rt.cni.gateway_class,
            )
        )
        objects.append(
            render.http_route(
                _SPLIT_GATEWAY,
                namespace=rt.namespace,
                session=rt.session,
                gateway_name=_SPLIT_GATEWAY,
                backends={f"split-{n}": (port, w) for n, (_, w) in backends.items()},
            )
        )
        return objects

    def create(self, backends: Mapping[str, tuple[Endpoint, int]], *, port: int) -> str:
        """Apply the split objects and return ``http://<gateway address>/`` once the Gateway
        has an address, its implementation accepted the HTTPRoute with every backend resolved,
        at the weights asked for (read back from the server), and the address answers a GET
        from this host with a 2xx.

        Raises
        ------
        cnibench.errors.ProvisioningError
            No address, or the route not accepted in time (with the route's own conditions),
            or stored weights that differ from those asked for.
        """
        rt = self._runtime
        objects = self.manifests({n: (e.name, w) for n, (e, w) in backends.items()}, port=port)
        rt.announce_cluster_wide(objects, why="the traffic split")
        rt.applier.apply_all(objects)
        self._objects.extend(objects)
        seen = "no status yet"

        def serving() -> str | None:
            nonlocal seen
            gateway = rt.applier.apply(objects[-2], dry_run=True)
            route = rt.applier.apply(objects[-1], dry_run=True)
            addresses = (gateway.get("status") or {}).get("addresses") or []
            problem = route_problem(route, {f"split-{n}": w for n, (_, w) in backends.items()})
            if addresses and not problem:
                url = f"http://{addresses[0]['value']}/"
                answer = http_status(url)
                if 200 <= answer < 300:
                    return url
                # Accepted in status a moment before the implementation routes by it.
                problem = f"{url} answers {answer or 'nothing'}"
            seen = problem or "the Gateway has no address"
            return None

        return wait_for(
            serving,
            timeout=rt.timeouts.pod_ready,
            what=f"the Gateway {_SPLIT_GATEWAY} to serve",
            interval=1.0,
            last_seen=lambda: seen,
            error=ProvisioningError,
        )

    def remove(self) -> None:
        """Delete the split objects. Safe to repeat."""
        for manifest in reversed(self._objects):
            self._runtime.applier.delete(manifest)
        self._objects.clear()
