"""``cnibench clean``, ``cnibench engine`` and ``cnibench images``: what keeps this machine
ready to benchmark (leftovers removed, a private container engine, the offline images)."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cnibench.cli.exits import EXIT_FAILED, EXIT_OK
from cnibench.errors import ConfigError

if TYPE_CHECKING:
    from cnibench.backends.kube.offline import OfflineBuilder

__all__: list[str] = []


def _clean(args: argparse.Namespace) -> int:
    from cnibench.backends.lab import clean_leftovers
    from cnibench.extras import missing_modules
    from cnibench.leases import clean_for

    print(clean_leftovers(dry_run=args.dry_run).summary())
    if missing_modules("kube"):
        # Without the kube extra cnibench made no cluster nor engine here to clean.
        print("kube: nothing to clean (cnibench's kube extra is not installed)")
        return EXIT_OK
    from cnibench.backends.kube import clean_kube_leftovers
    from cnibench.backends.kube.engines import clean_engines
    from cnibench.engine import running_engines

    owners = clean_for()
    engines = [e.paths.docker_host for e in running_engines() if e.running]
    kube = clean_kube_leftovers(
        dry_run=args.dry_run, kubeconfig=args.kubeconfig, docker_hosts=engines, clean_for=owners
    )
    print(kube.summary())
    # Last: kind clusters above may live in one of these engines, and one a cluster is left
    # in (kept for a live session, or not removed) stays up with it.
    left = kube.clusters_left
    print(clean_engines(dry_run=args.dry_run, clean_for=owners, clusters_left=left).summary())
    return EXIT_OK


def _engine(args: argparse.Namespace) -> int:
    """``cnibench engine up|down|status``: stdout of ``up`` is only the ``export`` line."""
    from cnibench.extras import require_extra

    require_extra("kube", "cnibench engine")
    from cnibench.backends.kube.engines import engine_down
    from cnibench.engine import engine_status, engine_up, format_size, running_engines

    if args.engine_command == "up":
        docker_host = engine_up(args.name)
        status = engine_status(args.name)
        print(
            f"cnibench: engine {args.name} answers (dockerd pid {status.pid}, data root"
            f" {status.paths.data_root}); stop it with: cnibench engine down --name {args.name}",
            file=sys.stderr,
        )
        print(f"export DOCKER_HOST={shlex.quote(docker_host)}")
    elif args.engine_command == "down":
        stopped = engine_down(args.name, purge=args.purge)
        what = "stopped" + (" and its image cache deleted" if args.purge else "")
        print(f"engine {args.name}: {what if stopped else 'was not running'}", file=sys.stderr)
    else:
        engines = running_engines()
        for status in engines:
            print(f"{status.summary()}; data {format_size(status.data_size())}")
        if not engines:
            print("no private engine on this machine")
    return EXIT_OK


def _images(args: argparse.Namespace) -> int:
    """``cnibench images build|list``: progress on stderr, the image tags on stdout."""
    from cnibench.extras import require_extra

    require_extra("kube", "cnibench images")
    from cnibench.backends.kube.offline import OfflineBuilder, offline_bin_dir, pod_image_tags
    from cnibench.backends.kube.offline.plan import offline_cnis
    from cnibench.backends.kube.offline.recipes import OFFLINE_GATEWAYS, OFFLINE_LOAD_ENGINES

    cnis = getattr(args, "cnis", [])
    known = (*offline_cnis(), *OFFLINE_GATEWAYS, *OFFLINE_LOAD_ENGINES)
    unknown = [name for name in cnis if name not in known]
    if unknown:
        raise ConfigError(
            f"no offline recipe for {', '.join(map(repr, unknown))}: choose from {', '.join(known)}"
        )
    builder = OfflineBuilder(log=lambda line: print(f"cnibench: {line}", file=sys.stderr))
    if args.images_command == "prune":
        return _prune(builder, dry_run=args.dry_run)
    if args.images_command == "push":
        return _push(builder, args.registry, cnis)
    tags = [builder.images.kind_node, *pod_image_tags(builder.images, cnis=cnis)]
    if args.images_command == "build":
        report = builder.build(cnis=cnis, images=not args.prepare)
        print(
            f"cnibench: {report.summary()}; kind and kubectl in {offline_bin_dir()}",
            file=sys.stderr,
        )
        if args.prepare:
            return EXIT_OK
        for tag in tags:
            print(tag)
        return EXIT_OK
    missing = 0
    for tag in tags:
        present = bool(builder.docker_host) and builder.image_exists(tag)
        missing += not present
        print(f"{tag}\t{'present' if present else 'missing'}")
    return EXIT_OK if not missing else EXIT_FAILED


def _push(builder: OfflineBuilder, registry: str, cnis: Sequence[str]) -> int:
    """``cnibench images push REGISTRY``: progress on stderr, the exports on stdout."""
    from cnibench.backends.kube.offline import pod_image_tags
    from cnibench.backends.kube.registry import check_registry, image_variables, push_images

    registry = check_registry(registry)
    if not builder.docker_host:
        raise ConfigError(
            "images push: DOCKER_HOST is not set; point it at the engine that built them"
            ' (eval "$(cnibench engine up)")'
        )
    report = push_images(
        builder.docker_host,
        pod_image_tags(builder.images, cnis=cnis),
        registry,
        log=lambda line: print(f"cnibench: {line}", file=sys.stderr),
    )
    print(f"cnibench: {report.summary().splitlines()[-1]}", file=sys.stderr)
    pushed = {remote for _, remote in report.pushed}
    for variable, ref in image_variables(builder.images.in_registry(registry)).items():
        if ref in pushed:
            print(f"export {variable}={ref}")
    return EXIT_OK


def _prune(builder: OfflineBuilder, *, dry_run: bool) -> int:
    """``cnibench images prune``: the stale tags, one line each, then a count."""
    from cnibench.backends.kube.offline.prune import current_tags, prune_images

    if not builder.docker_host:
        raise ConfigError(
            "images prune: DOCKER_HOST is not set; point it at the engine to prune"
            ' (eval "$(cnibench engine up)")'
        )
    report = prune_images(
        builder.docker_host, current_tags(builder.images, builder.versions), dry_run=dry_run
    )
    print(report.summary())
    return EXIT_OK if not report.failed else EXIT_FAILED
