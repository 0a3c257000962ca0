"""``cnibench clean`` for the Kubernetes backend: kind clusters and session namespaces left over.

Two kinds of leftovers can outlive an interrupted session: kind clusters named with
:data:`KIND_PREFIX` (every cluster :class:`~cnibench.backends.kube.providers.KindProvider`
creates; one a live cnibench process holds, :mod:`cnibench.leases`, is kept and said so),
and, in any cluster a kubeconfig reaches, namespaces and cluster-scoped objects labelled
``cnibench.io/session``: RBAC, and the CNI objects that have no namespace to go with
(:func:`cluster_scoped_kinds`: what each CNI driver declares, e.g. egress gateway objects and
cluster-wide policies). A kind whose CRD the cluster does not serve is skipped. Anything else
is never touched: unlabelled objects, clusters with other names, AKS
resources (``terraform destroy`` in the state directory), and nodes: a session writes no label
or taint to any node (pods select theirs by its own ``kubernetes.io/hostname`` label), so a
``cnibench.io/role`` label on a node of an existing cluster is its owner's and stays.
``tests/unit/test_clean_knows_every_object.py`` checks that every object a session renders is
in its namespace or of a kind looked for here.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cnibench.backends.kube.api import api_error_message
from cnibench.backends.kube.backend import api_client_for
from cnibench.backends.kube.cnis import DRIVERS
from cnibench.backends.kube.providers import (
    KIND_CLUSTER_LEASE,
    LIB_MODULES,
    add_offline_tools_to_path,
    forget_kind_state,
    kind_delete_argv,
    lib_modules_marker,
    release_lib_modules,
)
from cnibench.backends.kube.render import KUBE_SESSION_LEASE, SESSION_LABEL
from cnibench.engine import ENGINE_LEASE
from cnibench.errors import CnibenchError, ProvisioningError
from cnibench.leases import live_holders
from cnibench.waiting import Deadline, poll

__all__ = [
    "DEFAULT_DOCKER_SOCKET",
    "KIND_PREFIX",
    "CleanedItem",
    "KubeCleanReport",
    "clean_kube_leftovers",
    "cluster_scoped_kinds",
    "engine_absent",
    "lib_modules_outcome",
]

KIND_PREFIX = "cnibench-"
"""Name prefix of the kind clusters cnibench creates."""


def cluster_scoped_kinds() -> tuple[tuple[str, str], ...]:
    """Cluster-scoped CNI kinds (apiVersion, kind) a session may create, as every registered
    driver declares them: deleting the session's namespace does not remove them, so ``clean``
    looks for labelled ones."""
    kinds: dict[tuple[str, str], None] = {}
    for driver in DRIVERS.values():
        kinds.update(dict.fromkeys(driver.cluster_scoped_kinds))
    return tuple(kinds)


@dataclass(frozen=True)
class CleanedItem:
    """One leftover found.

    Attributes
    ----------
    kind:
        ``"kind-cluster"``, ``"namespace"``, ``"clusterrole"``, ``"clusterrolebinding"`` or a
        lower-cased :func:`cluster_scoped_kinds` kind (e.g. ``"egress"``).
    name:
        Its name.
    outcome:
        ``"removed"``, ``"would remove"`` (dry run), ``"kept: <why>"`` or
        ``"failed: <reason>"``.
    engine:
        For a kind cluster, the ``DOCKER_HOST`` of the engine it runs in (``""``: the
        default engine): :func:`~cnibench.engine.clean_engines` keeps an
        engine a cluster is left in.
    """

    kind: str
    name: str
    outcome: str
    engine: str = ""

    @property
    def gone(self) -> bool:
        """Whether it was removed (or, in a dry run, would be)."""
        return self.outcome in ("removed", "would remove")


@dataclass(frozen=True)
class KubeCleanReport:
    """What :func:`clean_kube_leftovers` removed (or, with ``dry_run``, would remove).

    Attributes
    ----------
    items:
        Every leftover found, in the order handled.
    notes:
        Parts that could not be looked at, one line each (e.g. kind is not installed).
    dry_run:
        Whether nothing was actually removed.
    """

    items: tuple[CleanedItem, ...]
    notes: tuple[str, ...] = ()
    dry_run: bool = False

    @property
    def failed(self) -> tuple[CleanedItem, ...]:
        """Items that could not be removed."""
        return tuple(i for i in self.items if i.outcome.startswith("failed"))

    @property
    def clusters_left(self) -> dict[str, list[str]]:
        """See :func:`clusters_left`."""
        return clusters_left(self.items)

    def summary(self) -> str:
        """One line per item and per note, for ``cnibench clean``."""
        lines = [f"kube: {i.kind} {i.name}: {i.outcome}" for i in self.items]
        lines.extend(f"kube: {note}" for note in self.notes)
        return "\n".join(lines) if lines else "kube: nothing to clean"


def clusters_left(items: Sequence[CleanedItem]) -> dict[str, list[str]]:
    """The kind clusters among ``items`` that are still there (kept, or not removed), by the
    ``DOCKER_HOST`` of the engine they run in."""
    left: dict[str, list[str]] = {}
    for item in items:
        if item.kind == "kind-cluster" and not item.gone:
            left.setdefault(item.engine, []).append(item.name)
    return left


def _run(argv: Sequence[str], *, docker_host: str = "") -> str:
    env = dict(os.environ, DOCKER_HOST=docker_host) if docker_host else None
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=300, check=False, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisioningError(f"{' '.join(argv[:3])} failed: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProvisioningError(f"{' '.join(argv[:3])} failed: {tail}")
    return done.stdout


DEFAULT_DOCKER_SOCKET = Path("/var/run/docker.sock")
"""Where an engine answers when ``$DOCKER_HOST`` is not set."""


def engine_absent(host: str) -> bool:
    """Whether no engine can be running at ``host`` (``""``: the default socket): a unix
    socket that does not exist. Any other address may be an engine that did not answer."""
    if host and not host.startswith("unix://"):
        return False
    return not (Path(host.removeprefix("unix://")) if host else DEFAULT_DOCKER_SOCKET).exists()


def lib_modules_outcome(
    items: Sequence[CleanedItem],
    unanswered: Sequence[str],
    *,
    dry_run: bool,
    modules_dir: Path = LIB_MODULES,
    clean_for: Collection[int] = (),
) -> str:
    """Remove the empty ``/lib/modules`` cnibench made for kind when no cnibench kind cluster
    can be left: every engine looked at answered (or has no socket at all, so no engine and
    none of its clusters runs), and every cluster found was removed. What was done, or why it
    stays; ``""`` when cnibench made none."""
    if not lib_modules_marker().is_file():
        return ""
    kept = [name for names in clusters_left(items).values() for name in names]
    why = ""
    if unanswered:
        why = f"{', '.join(unanswered)} did not answer, and a kind cluster there may use it"
    elif kept:
        why = f"kind cluster(s) {', '.join(kept)} are left"
    if why:
        return f"kept the {modules_dir} created for kind: {why}"
    if dry_run:
        return f"would remove the empty {modules_dir} created for kind"
    if release_lib_modules(modules_dir=modules_dir, exclude=clean_for):
        return f"removed the empty {modules_dir} created for kind"
    return (
        f"kept the {modules_dir} created for kind: a live cnibench process holds a kind"
        " cluster or an engine, or it is no longer empty"
    )


def _clean_kind(
    runner: Callable[[Sequence[str]], str],
    *,
    dry_run: bool,
    engine_holders: Sequence[int] = (),
    engine: str = "",
    clean_for: Collection[int] = (),
) -> tuple[list[CleanedItem], list[str]]:
    """Remove the ``cnibench-*`` kind clusters ``runner``'s engine (``engine``) holds, keeping
    one a live cnibench process holds, and every one when a live process holds the engine
    itself (``engine_holders``: a test tier or study between its runs keeps clusters there).
    The leases of ``clean_for`` keep nothing (:data:`~cnibench.leases.CLEAN_FOR_VARIABLE`)."""
    try:
        listed = runner(["kind", "get", "clusters"])
    except CnibenchError as exc:
        return [], [f"kind clusters not listed: {exc}"]
    items = []
    for name in listed.split():
        if not name.startswith(KIND_PREFIX):
            continue
        holders = live_holders(KIND_CLUSTER_LEASE, name, exclude=clean_for)
        if holders:
            # Another shell's session (or a test run beside this one) is using it.
            pids = ", ".join(map(str, holders))
            outcome = f"kept: in use by pid {pids}"
        elif engine_holders:
            pids = ", ".join(map(str, engine_holders))
            outcome = f"kept: its engine is in use by pid {pids}"
        elif dry_run:
            outcome = "would remove"
        else:
            try:
                runner(kind_delete_argv(name))
            except CnibenchError as exc:
                outcome = f"failed: {exc}"
            else:
                forget_kind_state(name)
                outcome = "removed"
        items.append(CleanedItem("kind-cluster", name, outcome, engine=engine))
    return items, []


def _delete_each(
    kind: str,
    list_: Callable[..., Any],
    delete: Callable[[str], Any],
    items: list[CleanedItem],
    *,
    dry_run: bool,
) -> list[tuple[int, str]]:
    """Delete every session-labelled object ``list_`` finds, reporting each in ``items``.

    A 404 counts as removed (someone else was faster). Returns ``(index in items, name)`` of
    each object removed, for callers that wait until it is gone.
    """
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic.exceptions import DynamicApiError

    try:
        found = list_(label_selector=SESSION_LABEL).items
    except (ApiException, DynamicApiError) as exc:
        items.append(CleanedItem(kind, "*", f"failed: listing: {api_error_message(exc)}"))
        return []
    removed: list[tuple[int, str]] = []
    for obj in found:
        name = str(obj.metadata.name)
        session = str((obj.metadata.labels or {}).get(SESSION_LABEL, ""))
        holders = live_holders(KUBE_SESSION_LEASE, session) if session else ()
        if holders:
            pids = ", ".join(map(str, holders))
            items.append(CleanedItem(kind, name, f"kept: session {session} of live pid {pids}"))
            continue
        if dry_run:
            items.append(CleanedItem(kind, name, "would remove"))
            continue
        try:
            delete(name)
        except (ApiException, DynamicApiError) as exc:
            if getattr(exc, "status", None) != 404:
                items.append(CleanedItem(kind, name, f"failed: {api_error_message(exc)}"))
                continue
        items.append(CleanedItem(kind, name, "removed"))
        removed.append((len(items) - 1, name))
    return removed


def _clean_api(api_client: Any, *, dry_run: bool, timeout: float) -> list[CleanedItem]:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core: Any = client.CoreV1Api(api_client)
    rbac: Any = client.RbacAuthorizationV1Api(api_client)
    kinds: list[tuple[str, Any, Any, Any]] = [
        ("namespace", core.list_namespace, core.delete_namespace, core.read_namespace),
        ("clusterrolebinding", rbac.list_cluster_role_binding, rbac.delete_cluster_role_binding,
         None),
        ("clusterrole", rbac.list_cluster_role, rbac.delete_cluster_role, None),
    ]  # fmt: skip
    items: list[CleanedItem] = []
    waiting: list[tuple[int, Any, str]] = []
    for kind, list_, delete, read in kinds:
        for index, name in _delete_each(kind, list_, delete, items, dry_run=dry_run):
            if read is not None:
                waiting.append((index, read, name))
    items.extend(_clean_custom(api_client, dry_run=dry_run))
    deadline = Deadline(timeout)
    for index, read, name in waiting:

        def gone(read: Any = read, name: str = name) -> bool:
            try:
                read(name)
            except ApiException as exc:
                return bool(exc.status == 404)
            return False

        if not poll(gone, timeout=deadline, interval=0.25):
            items[index] = CleanedItem(
                items[index].kind, name, f"failed: still terminating after {timeout:g} s"
            )
    return items


def _delete_named(resource: Any, name: str) -> None:
    resource.delete(name=name)


def _clean_custom(api_client: Any, *, dry_run: bool) -> list[CleanedItem]:
    from kubernetes import dynamic
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    factory: Any = dynamic.DynamicClient
    resources = factory(api_client).resources
    items: list[CleanedItem] = []
    for api_version, kind in cluster_scoped_kinds():
        try:
            resource = resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            continue  # the CNI (its CRD) is not installed: nothing of this kind can be left
        delete = functools.partial(_delete_named, resource)
        _delete_each(kind.lower(), resource.get, delete, items, dry_run=dry_run)
    return items


def clean_kube_leftovers(
    *,
    dry_run: bool = False,
    kubeconfig: Path | None = None,
    context: str = "",
    api_client: Any = None,
    runner: Callable[[Sequence[str]], str] | None = None,
    timeout: float = 120.0,
    docker_hosts: Sequence[str] = (),
    modules_dir: Path = LIB_MODULES,
    clean_for: Collection[int] = (),
) -> KubeCleanReport:
    """Remove kind clusters named ``cnibench-*`` and labelled session objects of a cluster.

    Parameters
    ----------
    dry_run:
        Only list what would be removed.
    kubeconfig, context:
        Cluster whose ``cnibench.io/session`` namespaces and cluster-scoped objects to
        remove; none: only kind clusters are cleaned.
    api_client:
        A ready :class:`kubernetes.client.ApiClient` instead of ``kubeconfig``.
    runner:
        Runs a kind argv and returns its stdout (tests pass a fake; by default ``kind`` on
        PATH, and the kind part is skipped with a note when it is missing).
    timeout:
        Seconds to wait for deleted namespaces to disappear.
    docker_hosts:
        Engines to look for kind clusters in besides ``$DOCKER_HOST`` (the private engines of
        ``cnibench engine up``, whose address a shell may not have exported).
    modules_dir:
        The ``/lib/modules`` cnibench may have made for kind (tests pass another): removed,
        with its marker, once no cnibench kind cluster can be left in any engine looked at
        (:func:`lib_modules_outcome`), else kept with a note that says why.
    clean_for:
        PIDs this clean runs for (:func:`cnibench.leases.clean_for`): their leases keep
        no cluster or engine from it.

    Returns
    -------
    KubeCleanReport
        One item per leftover; failures are items, not exceptions.
    """
    items: list[CleanedItem] = []
    notes: list[str] = []
    if runner is None:
        add_offline_tools_to_path()
    engines = dict.fromkeys([os.environ.get("DOCKER_HOST", ""), *docker_hosts])
    unanswered: list[str] = []  # engines that may run and whose kind clusters are not known
    if runner is None and shutil.which("kind") is None:
        notes.append("kind is not installed: no kind clusters looked at")
        unanswered = [host or "the default engine" for host in engines if not engine_absent(host)]
    elif runner is not None:
        kind_items, kind_notes = _clean_kind(runner, dry_run=dry_run)
        items.extend(kind_items)
        notes.extend(kind_notes)
    else:
        for host in engines:
            kind_items, kind_notes = _clean_kind(
                functools.partial(_run, docker_host=host),
                dry_run=dry_run,
                engine_holders=live_holders(ENGINE_LEASE, host, exclude=clean_for) if host else (),
                engine=host,
                clean_for=clean_for,
            )
            items.extend(kind_items)
            if kind_notes and not engine_absent(host):
                unanswered.append(host or "the default engine")
            # An unreachable default engine is no news when private engines were looked at.
            if host or not docker_hosts:
                notes.extend(kind_notes)
    if runner is None:
        outcome = lib_modules_outcome(
            items, unanswered, dry_run=dry_run, modules_dir=modules_dir, clean_for=clean_for
        )
        if outcome:
            notes.append(outcome)
    owned_client = None
    if api_client is None and kubeconfig is not None:
        try:
            api_client = owned_client = api_client_for(kubeconfig, context)
        except CnibenchError as exc:
            notes.append(f"namespaces not looked at: {exc}")
    if api_client is not None:
        try:
            items.extend(_clean_api(api_client, dry_run=dry_run, timeout=timeout))
        finally:
            if owned_client is not None:
                owned_client.close()
    return KubeCleanReport(items=tuple(items), notes=tuple(notes), dry_run=dry_run)
