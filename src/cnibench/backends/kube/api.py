"""The small layer that sends rendered objects to an API server (official kubernetes client).

Objects go in by server-side apply (``fieldManager=cnibench``, conflicts forced), optionally as
a dry run (``dryRun=All``): the server validates them against its schemas, CRDs included,
without storing anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from cnibench.errors import ProvisioningError

__all__ = [
    "DEFAULT_NAMESPACE",
    "FIELD_MANAGER",
    "Applier",
    "api_error_message",
    "apply_manifest",
    "websocket_core_api",
]

FIELD_MANAGER = "cnibench"
DEFAULT_NAMESPACE = "default"
"""Where a namespaced object that names no namespace goes (kubectl's rule)."""


def websocket_core_api(api_client: Any) -> Any:
    """A ``CoreV1Api`` on an API client of its own, for one ``stream`` (exec) or
    ``portforward`` call of the kubernetes client.

    Those calls replace ``call_api`` on the API client they are given while the websocket
    opens, then put back what they found. On a client shared between threads that routes a
    concurrent plain request through the websocket ("Handshake status 200 OK"), and two
    overlapping streams can leave the client's ``call_api`` replaced for good. The websocket
    does not use the client's connection pool, so the returned client needs no closing.
    """
    from kubernetes import client

    return client.CoreV1Api(client.ApiClient(api_client.configuration))


def api_error_message(exc: BaseException) -> str:
    """One line from a kubernetes client error: the server's ``message`` when there is one."""
    body = getattr(exc, "body", None)
    if body:
        try:
            message = json.loads(body).get("message")
        except (ValueError, AttributeError):
            message = None
        if message:
            return str(message)
    embedded = _embedded_status_message(str(exc))
    if embedded:
        return embedded
    status, reason = getattr(exc, "status", None), getattr(exc, "reason", None)
    if status is not None:
        return f"HTTP {status} {reason or ''}".strip()
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _embedded_status_message(text: str) -> str:
    """The ``message`` of a ``Status`` object inside ``text`` (a websocket handshake error
    carries the server's answer after its headers), or ``""``."""
    start = text.rfind('{"kind":"Status"')
    if start < 0:
        return ""
    try:
        status, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return ""
    message = status.get("message") if isinstance(status, dict) else None
    return str(message) if message else ""


def _with_namespace(manifest: Mapping[str, Any], *, namespaced: bool) -> Mapping[str, Any]:
    """``manifest`` with ``metadata.namespace`` set to ``default`` when its kind is namespaced
    and it names none, as kubectl does for release manifests; anything else unchanged.

    Raises
    ------
    cnibench.errors.ProvisioningError
        The object has no ``metadata.name``.
    """
    meta = manifest.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise ProvisioningError(f"object without metadata.name: {_describe(manifest)}")
    if not namespaced or meta.get("namespace"):
        return manifest
    return {**manifest, "metadata": {**meta, "namespace": DEFAULT_NAMESPACE}}


def _describe(manifest: Mapping[str, Any]) -> str:
    meta = manifest.get("metadata", {})
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    return f"{manifest.get('kind', '?')} {where}{meta.get('name', '?')}"


class Applier:
    """Server-side apply of plain-dict objects through one discovery cache.

    Parameters
    ----------
    api_client:
        A :class:`kubernetes.client.ApiClient`.
    """

    def __init__(self, api_client: Any) -> None:
        from kubernetes import dynamic

        factory: Any = dynamic.DynamicClient
        self._dynamic: Any = factory(api_client)

    def _resource(self, manifest: Mapping[str, Any]) -> Any:
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
        if not api_version or not kind:
            raise ProvisioningError(f"object without apiVersion/kind: {_describe(manifest)}")
        try:
            return self._dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            # A CRD may have been installed after discovery ran: look again once.
            self._dynamic.resources.invalidate_cache()
            try:
                return self._dynamic.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError as exc:
                raise ProvisioningError(
                    f"the API server does not serve {kind} ({api_version}): is its CRD installed?"
                ) from exc

    def namespaced(self, manifest: Mapping[str, Any]) -> bool:
        """Whether the server keeps objects of ``manifest``'s kind in a namespace (from its
        discovery, so a CRD's scope is the CRD's own).

        Raises
        ------
        cnibench.errors.ProvisioningError
            The server does not know the kind.
        """
        return bool(self._resource(manifest).namespaced)

    def apply(self, manifest: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply ``manifest``; returns the object as the server stored (or would
        store) it.

        Raises
        ------
        cnibench.errors.ProvisioningError
            The server rejected the object (the message names it and gives the server's
            reason) or does not know its kind.
        """
        from kubernetes.client.exceptions import ApiException
        from kubernetes.dynamic.exceptions import DynamicApiError

        resource = self._resource(manifest)
        manifest = _with_namespace(manifest, namespaced=bool(resource.namespaced))
        options: dict[str, Any] = {"field_manager": FIELD_MANAGER, "force_conflicts": True}
        if dry_run:
            options["dry_run"] = "All"
        try:
            answer = self._dynamic.server_side_apply(resource, body=dict(manifest), **options)
        except (ApiException, DynamicApiError) as exc:
            raise ProvisioningError(
                f"{_describe(manifest)} rejected: {api_error_message(exc)}"
            ) from exc
        result: dict[str, Any] = answer.to_dict()
        return result

    def apply_all(
        self, manifests: Iterable[Mapping[str, Any]], *, dry_run: bool = False
    ) -> list[dict[str, Any]]:
        """:meth:`apply` each object in order."""
        return [self.apply(m, dry_run=dry_run) for m in manifests]

    def delete(self, manifest: Mapping[str, Any]) -> bool:
        """Delete the object ``manifest`` names; returns whether it existed."""
        from kubernetes.client.exceptions import ApiException
        from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError

        resource = self._resource(manifest)
        meta = _with_namespace(manifest, namespaced=bool(resource.namespaced))["metadata"]
        try:
            resource.delete(name=meta["name"], namespace=meta.get("namespace"))
        except NotFoundError:
            return False
        except (ApiException, DynamicApiError) as exc:
            if getattr(exc, "status", None) == 404:
                return False
            raise ProvisioningError(
                f"{_describe(manifest)} could not be deleted: {api_error_message(exc)}"
            ) from exc
        return True


def apply_manifest(
    api_client: Any, manifest: Mapping[str, Any], *, dry_run: bool = False
) -> dict[str, Any]:
    """Server-side apply one object (see :meth:`Applier.apply`)."""
    return Applier(api_client).apply(manifest, dry_run=dry_run)
