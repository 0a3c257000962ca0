"""What goes into a cluster besides the CNI, and how release manifests go in without kubectl.

Release manifests (kube-router, MetalLB, the Gateway API CRDs) are fetched over HTTPS, split
into objects and sent by server-side apply through :class:`~cnibench.backends.kube.api.
Applier`, in an order a fresh cluster accepts (:func:`apply_order`): CustomResourceDefinitions
first, waited on until Established, then Namespaces, then everything else, then objects of the
manifest's own CRDs, and admission webhook configurations last. Objects cnibench renders for a
CNI itself (flannel's, :mod:`cnibench.backends.kube.cnis`) take the same path without a fetch.

The install path (:func:`install_cni`) handles the Gateway API ordering trap: when a CNI needs
Gateway API (Cilium's ``gateway-api`` feature, NGINX Gateway Fabric for Antrea), the standard
CRDs of the pinned release are installed and Established *before* the chart, because
cilium-operator checks for them once at start and otherwise leaves Gateway API off.

On kind, :func:`install_metallb` gives LoadBalancer Services (the Gateway's address in the
split scenario) addresses from the kind docker network, which kind cannot do by itself.

Every network step is injectable (``fetch``, ``helm``) so the kube test tier runs the same code
against a real API server with documents from the Go module cache.
"""

from __future__ import annotations

import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cnibench.backends.kube import render
from cnibench.backends.kube.api import Applier, api_error_message
from cnibench.backends.kube.cni_types import CniDefinition, HelmChart, Readiness
from cnibench.backends.kube.helm import helm_install_argv, write_values
from cnibench.errors import ProvisioningError
from cnibench.waiting import Deadline, wait_for

__all__ = [
    "FETCH_TIMEOUT",
    "METALLB_NAMESPACE",
    "METALLB_POOL",
    "METALLB_READINESS",
    "AddonVersions",
    "Fetcher",
    "HelmRunner",
    "apply_order",
    "apply_when_admitted",
    "fetch_manifest",
    "gateway_api_crds_url",
    "install_cni",
    "install_manifests",
    "install_metallb",
    "install_release_manifest",
    "metallb_manifest_url",
    "run_checked",
    "split_documents",
    "wait_crds_established",
    "wait_rollouts",
]

Fetcher = Callable[[str], str]
"""Returns the text at a URL (tests pass one that reads the Go module cache)."""
HelmRunner = Callable[[Sequence[str]], None]
"""Runs a helm argv, raising :class:`~cnibench.errors.ProvisioningError` on failure."""

FETCH_TIMEOUT = 60.0
"""Seconds one manifest download may take."""
METALLB_NAMESPACE = "metallb-system"
METALLB_POOL = "cnibench"
"""Name of cnibench's IPAddressPool and L2Advertisement."""
METALLB_READINESS = (
    Readiness("Deployment", METALLB_NAMESPACE, "controller"),
    Readiness("DaemonSet", METALLB_NAMESPACE, "speaker"),
)
"""MetalLB's workloads: the controller (which also serves the webhook) and the speakers."""

_CRD = "CustomResourceDefinition"
_WEBHOOK_CONFIGURATIONS = frozenset(
    {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
)


@dataclass(frozen=True)
class AddonVersions:
    """Pinned versions of cluster add-ons that are not CNIs.

    Attributes
    ----------
    metallb:
        MetalLB release tag (native L2 mode manifest).
    """

    metallb: str = "v0.15.2"


def gateway_api_crds_url(version: str) -> str:
    """URL of a Gateway API release's ``standard-install.yaml`` (standard-channel CRDs)."""
    return (
        f"https://github.com/kubernetes-sigs/gateway-api/releases/download/{version}/"
        "standard-install.yaml"
    )


def metallb_manifest_url(version: str) -> str:
    """URL of MetalLB's ``metallb-native.yaml`` (CRDs, controller, speakers, webhook)."""
    return (
        f"https://raw.githubusercontent.com/metallb/metallb/{version}/config/manifests/"
        "metallb-native.yaml"
    )


def fetch_manifest(url: str, *, timeout: float = FETCH_TIMEOUT) -> str:
    """Download a release manifest (``timeout`` seconds for the whole request).

    Raises
    ------
    cnibench.errors.ProvisioningError
        One line naming the URL: HTTP error, unreachable host, timeout or non-UTF-8 body.
    """
    request = urllib.request.Request(url, headers={"User-Agent": "cnibench"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body: bytes = answer.read()
    except urllib.error.HTTPError as exc:
        raise ProvisioningError(f"cannot fetch {url}: HTTP {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        raise ProvisioningError(f"cannot fetch {url}: {exc.reason}") from exc
    except (OSError, ValueError) as exc:
        raise ProvisioningError(f"cannot fetch {url}: {exc}") from exc
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProvisioningError(f"cannot fetch {url}: the body is not UTF-8 text") from exc


def split_documents(text: str, *, source: str = "manifest") -> list[dict[str, Any]]:
    """The objects of a multi-document YAML manifest, in file order.

    Empty documents are dropped and ``kind: List`` documents are expanded into their items.

    Parameters
    ----------
    text:
        The manifest.
    source:
        Where it came from (a URL or path), for error messages.

    Raises
    ------
    cnibench.errors.ProvisioningError
        Invalid YAML (with the line), or a document that is not an object with
        ``apiVersion``, ``kind`` and ``metadata.name`` (with its position).
    """
    try:
        loaded = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ProvisioningError(f"{source} is not valid YAML{where}") from exc
    objects: list[dict[str, Any]] = []
    for position, document in enumerate(loaded, start=1):
        if document is None:
            continue
        items = document.get("items") if isinstance(document, dict) else None
        if isinstance(document, dict) and document.get("kind") == "List":
            candidates = items if isinstance(items, list) else []
        else:
            candidates = [document]
        for candidate in candidates:
            if not _is_object(candidate):
                raise ProvisioningError(
                    f"{source}: document {position} is not a Kubernetes object"
                    " (apiVersion, kind and metadata.name needed)"
                )
            objects.append(candidate)
    return objects


def _is_object(document: object) -> bool:
    if not isinstance(document, dict):
        return False
    metadata = document.get("metadata")
    return (
        bool(document.get("apiVersion"))
        and bool(document.get("kind"))
        and isinstance(metadata, dict)
        and bool(metadata.get("name"))
    )


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def apply_order(documents: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``documents`` in the order a fresh cluster accepts them (stable within each rank).

    1. CustomResourceDefinitions (their kinds must exist before any object of them);
    2. Namespaces (namespaced objects need theirs);
    3. everything else;
    4. objects whose kind a CRD of the same manifest defines;
    5. admission webhook configurations: until the Deployment behind a webhook serves, the
       webhook would reject every object it matches, including the manifest's own.
    """
    listed = [dict(d) for d in documents]
    own_kinds = {
        (str(d["spec"].get("group", "")), str(d["spec"].get("names", {}).get("kind", "")))
        for d in listed
        if d.get("kind") == _CRD and isinstance(d.get("spec"), dict)
    }

    def rank(document: Mapping[str, Any]) -> int:
        kind = str(document.get("kind", ""))
        if kind == _CRD:
            return 0
        if kind == "Namespace":
            return 1
        if kind in _WEBHOOK_CONFIGURATIONS:
            return 4
        if (_group(str(document.get("apiVersion", ""))), kind) in own_kinds:
            return 3
        return 2

    return sorted(listed, key=rank)


def wait_crds_established(
    api_client: Any, names: Iterable[str], *, timeout: float = 120.0, interval: float = 0.5
) -> None:
    """Wait until every CRD in ``names`` has condition ``Established=True``.

    Parameters
    ----------
    timeout:
        Seconds for all of them together.
    interval:
        Seconds between polls.

    Raises
    ------
    cnibench.errors.ProvisioningError
        A CRD is not Established in time, or cannot be read (named in the message).
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    extensions: Any = client.ApiextensionsV1Api(api_client)
    deadline = Deadline(timeout)
    for name in names:

        def established(name: str = name) -> bool:
            try:
                crd = extensions.read_custom_resource_definition(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise ProvisioningError(
                        f"CRD {name} cannot be read: {api_error_message(exc)}"
                    ) from exc
                return False
            conditions = {c.type: c.status for c in (crd.status.conditions or [])}
            return conditions.get("Established") == "True"

        wait_for(
            established,
            timeout=deadline,
            what=f"CRD {name} to be Established",
            interval=interval,
            error=ProvisioningError,
        )


def install_manifests(
    api_client: Any, documents: Iterable[Mapping[str, Any]], *, timeout: float = 120.0
) -> list[str]:
    """Server-side apply every object of a release manifest in :func:`apply_order`.

    CRDs go first and are waited on (``Established``) before any other object is sent.

    Parameters
    ----------
    api_client:
        A :class:`kubernetes.client.ApiClient`.
    documents:
        The manifest's objects (see :func:`split_documents`).
    timeout:
        Seconds the CRDs may take to become Established.

    Returns
    -------
    list of str
        ``Kind namespace/name`` of each object, in the order applied.

    Raises
    ------
    cnibench.errors.ProvisioningError
        The server rejects an object, or a CRD is not Established in time.
    """
    ordered = apply_order(documents)
    applier = Applier(api_client)
    crds = [d for d in ordered if d.get("kind") == _CRD]
    for crd in crds:
        applier.apply(crd)
    wait_crds_established(api_client, [c["metadata"]["name"] for c in crds], timeout=timeout)
    for document in ordered[len(crds) :]:
        applier.apply(document)
    return [_describe(d) for d in ordered]


def _describe(document: Mapping[str, Any]) -> str:
    metadata = document.get("metadata", {})
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{document.get('kind')} {where}{metadata.get('name')}"


def local_manifests(directory: Path) -> list[dict[str, Any]]:
    """The objects of every ``*.yaml`` file in ``directory`` (sorted by name), e.g. a Gateway
    API release's CRDs used in place from the Go module cache.

    Raises
    ------
    cnibench.errors.ProvisioningError
        The directory holds no manifest (its module was not downloaded), or one is not YAML.
    """
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise ProvisioningError(
            f"no manifest in {directory}: build the images that need it (cnibench images build)"
        )
    return [doc for path in files for doc in split_documents(path.read_text(), source=str(path))]


def install_release_manifest(
    api_client: Any, url: str, *, fetch: Fetcher | None = None, timeout: float = 120.0
) -> list[str]:
    """Fetch ``url``, split it and :func:`install_manifests` it (no kubectl needed).

    Raises
    ------
    cnibench.errors.ProvisioningError
        The download, the YAML or an object fails (the message names the URL or object).
    """
    text = (fetch or fetch_manifest)(url)
    return install_manifests(api_client, split_documents(text, source=url), timeout=timeout)


def wait_rollouts(
    api_client: Any,
    items: Sequence[Readiness],
    *,
    timeout: float = 600.0,
    owner: str = "",
    missing: str = "",
) -> None:
    """Wait until every DaemonSet/Deployment in ``items`` is fully rolled out.

    A DaemonSet is ready when it has scheduled pods and all are ready; a Deployment when at
    least one replica is available.

    Parameters
    ----------
    timeout:
        Seconds for all of them together.
    owner:
        What they belong to (``cilium``, ``metallb``), prefixed to error messages.
    missing:
        When not empty, a workload that does not exist fails at once with this hint appended
        (for a cluster nobody is installing anything on right now); when empty, it is waited
        for like one that is not ready (an install may still be creating it).

    Raises
    ------
    cnibench.errors.ProvisioningError
        One is not ready within ``timeout`` seconds, is missing (see ``missing``), or cannot be
        read (named in the message).
    """
    from kubernetes import client

    apps: Any = client.AppsV1Api(api_client)
    deadline = Deadline(timeout)
    for item in items:
        _wait_rollout(apps, item, deadline, owner=owner, missing=missing)


def _wait_rollout(
    apps: Any, item: Readiness, deadline: Deadline, *, owner: str, missing: str
) -> None:
    """Wait for one workload of :func:`wait_rollouts` within the shared ``deadline``."""
    from kubernetes.client.exceptions import ApiException

    name = f"{owner + ': ' if owner else ''}{item.kind} {item.namespace}/{item.name}"
    seen = "not read yet"

    def rolled_out() -> bool:
        nonlocal seen
        try:
            if item.kind == "DaemonSet":
                status = apps.read_namespaced_daemon_set(item.name, item.namespace).status
                seen = (
                    f"{status.number_ready or 0} of {status.desired_number_scheduled or 0}"
                    " pods ready"
                )
                return bool(status.desired_number_scheduled) and (
                    status.number_ready == status.desired_number_scheduled
                )
            status = apps.read_namespaced_deployment(item.name, item.namespace).status
            seen = f"{status.available_replicas or 0} replicas available"
            return bool(status.available_replicas)
        except ApiException as exc:
            if exc.status != 404:
                raise ProvisioningError(f"{name}: HTTP {exc.status}") from exc
            if missing:
                raise ProvisioningError(f"{name} not found: {missing}") from None
            seen = "not found"
            return False

    wait_for(
        rolled_out,
        timeout=deadline,
        what=f"{name} to be ready",
        interval=2.0,
        last_seen=lambda: seen,
        error=ProvisioningError,
    )


def run_checked(argv: Sequence[str], *, timeout: float = 900.0) -> None:
    """Run a provisioning command (helm), raising with its last stderr line on failure.

    Raises
    ------
    cnibench.errors.ProvisioningError
        The program is missing, exceeds ``timeout`` seconds, or exits non-zero.
    """
    command = list(argv)
    label = " ".join(command[:2])
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisioningError(f"{label} failed: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [""])[-1]
        raise ProvisioningError(f"{label} failed: {tail}")


def _install_chart(chart: HelmChart, *, kubeconfig: Path, context: str, helm: HelmRunner) -> None:
    with tempfile.TemporaryDirectory(prefix="cnibench-helm-") as tmp:
        values = write_values(chart, Path(tmp))
        helm(helm_install_argv(chart, values, kubeconfig=kubeconfig, context=context))


def install_cni(
    api_client: Any,
    cni: CniDefinition,
    *,
    kubeconfig: Path,
    context: str = "",
    helm: HelmRunner | None = None,
    fetch: Fetcher | None = None,
    timeout: float = 120.0,
) -> None:
    """Install a CNI and what it depends on, in the order that works on a fresh cluster.

    1. the Gateway API CRDs of ``cni.gateway_api_crds``, waited on until Established;
    2. the CNI: its Helm chart, else its release manifests, else the objects cnibench rendered
       for it (``cni.manifests``, flannel's); manifests go in by server-side apply in
       :func:`apply_order` (no kubectl, and for rendered objects no network);
    3. ``cni.addon_charts`` (NGINX Gateway Fabric).

    Readiness is not awaited here (see :func:`wait_rollouts`).

    Parameters
    ----------
    api_client:
        A :class:`kubernetes.client.ApiClient` for the cluster.
    kubeconfig, context:
        What helm connects with.
    helm:
        Runs helm argvs; :func:`run_checked` by default.
    fetch:
        Downloads manifests; :func:`fetch_manifest` by default.
    timeout:
        Seconds CRDs may take to become Established.

    Raises
    ------
    cnibench.errors.ProvisioningError
        With the failing step.
    """
    runner = helm or run_checked
    if cni.gateway_api_crds_dir:
        install_manifests(
            api_client, local_manifests(Path(cni.gateway_api_crds_dir)), timeout=timeout
        )
    elif cni.gateway_api_crds:
        install_release_manifest(
            api_client, gateway_api_crds_url(cni.gateway_api_crds), fetch=fetch, timeout=timeout
        )
    if cni.chart is not None:
        _install_chart(cni.chart, kubeconfig=kubeconfig, context=context, helm=runner)
    elif cni.manifest_urls:
        for url in cni.manifest_urls:
            install_release_manifest(api_client, url, fetch=fetch, timeout=timeout)
    elif cni.manifests:
        install_manifests(api_client, cni.manifests, timeout=timeout)
    if cni.addon_manifests:
        install_manifests(api_client, cni.addon_manifests, timeout=timeout)
    for chart in cni.addon_charts:
        _install_chart(chart, kubeconfig=kubeconfig, context=context, helm=runner)


class _WebhookNotServingError(Exception):
    """An object was rejected only because its admission webhook did not answer (yet)."""


def apply_when_admitted(
    api_client: Any,
    manifests: Sequence[Mapping[str, Any]],
    *,
    timeout: float = 120.0,
    interval: float = 2.0,
) -> list[dict[str, Any]]:
    """Server-side apply ``manifests`` in order, retrying while an admission webhook is not
    serving yet.

    A webhook's configuration exists as soon as its manifest is applied, but its Service
    answers only once the pod behind it runs (MetalLB's controller needs a while to write its
    certificate), and the API server rejects objects it cannot get reviewed.

    Parameters
    ----------
    timeout:
        Seconds to keep retrying, for all objects together.
    interval:
        Seconds between attempts.

    Returns
    -------
    list of dict
        The objects as the server stored them.

    Raises
    ------
    cnibench.errors.ProvisioningError
        An object is rejected for another reason (at once), or still cannot be reviewed after
        ``timeout`` seconds.
    """
    applier = Applier(api_client)
    deadline = Deadline(timeout)
    stored: list[dict[str, Any]] = []
    for manifest in manifests:

        def admitted(manifest: Mapping[str, Any] = manifest) -> dict[str, Any]:
            try:
                return applier.apply(manifest)
            except ProvisioningError as exc:
                if "failed calling webhook" not in str(exc):
                    raise
                raise _WebhookNotServingError(str(exc)) from exc

        stored.append(
            wait_for(
                admitted,
                timeout=deadline,
                what=f"the admission webhook to review {_describe(manifest)}",
                interval=interval,
                error=ProvisioningError,
                retry=(_WebhookNotServingError,),
            )
        )
    return stored


def install_metallb(
    api_client: Any,
    address_range: tuple[str, str],
    *,
    versions: AddonVersions | None = None,
    fetch: Fetcher | None = None,
    documents: Sequence[Mapping[str, Any]] | None = None,
    timeout: float = 300.0,
    admission_timeout: float = 120.0,
) -> None:
    """MetalLB in native L2 mode, handing out ``address_range`` to LoadBalancer Services.

    Applies the release manifest, waits for Deployment ``metallb-system/controller`` and
    DaemonSet ``metallb-system/speaker``, then applies cnibench's IPAddressPool and
    L2Advertisement (retrying while MetalLB's webhook is not serving yet).

    Parameters
    ----------
    api_client:
        A :class:`kubernetes.client.ApiClient` for the cluster.
    address_range:
        ``(first, last)`` IPv4 addresses, free on the nodes' network.
    versions:
        Pinned add-on versions (:class:`AddonVersions` defaults).
    fetch:
        Downloads the manifest (:func:`fetch_manifest` by default).
    documents:
        The manifest's objects, instead of downloading it.
    timeout:
        Seconds for the rollout of controller and speakers.
    admission_timeout:
        Seconds to retry the pool while the webhook is not serving.

    Raises
    ------
    cnibench.errors.ProvisioningError
        With the failing step.
    cnibench.errors.ConfigError
        ``address_range`` is not a valid range.
    """
    version = (versions or AddonVersions()).metallb
    pool = render.metallb_ip_address_pool(
        METALLB_POOL, namespace=METALLB_NAMESPACE, address_range=address_range
    )
    advertisement = render.metallb_l2_advertisement(
        METALLB_POOL, namespace=METALLB_NAMESPACE, pools=[METALLB_POOL]
    )
    if documents is None:
        url = metallb_manifest_url(version)
        documents = split_documents((fetch or fetch_manifest)(url), source=url)
    install_manifests(api_client, documents)
    wait_rollouts(api_client, METALLB_READINESS, timeout=timeout, owner=f"metallb {version}")
    apply_when_admitted(api_client, [pool, advertisement], timeout=admission_timeout)
