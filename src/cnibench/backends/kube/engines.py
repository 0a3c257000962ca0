"""The private engine (:mod:`cnibench.engine`) as kind uses it.

kind bind-mounts ``/lib/modules`` into every node, and on a kernel with everything built in
cnibench makes that directory for it (:meth:`~.providers.KindProvider.ensure`). Once no private
engine runs, no kind cluster of cnibench's can use it, so stopping the last engine removes it
too, however the engine was stopped: ``cnibench engine down``, ``cnibench clean``, the study.
Those stop engines through :func:`engine_down` and :func:`clean_engines` here, which are
:mod:`cnibench.engine`'s with that step added.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from cnibench import engine
from cnibench.backends.kube.providers import release_lib_modules

__all__ = ["clean_engines", "engine_down"]


def _release(environ: Mapping[str, str] | None) -> None:
    release_lib_modules(environ=environ)


def engine_down(
    name: str = engine.DEFAULT_ENGINE_NAME,
    *,
    purge: bool = False,
    environ: Mapping[str, str] | None = None,
    timeout: float = engine.STOP_TIMEOUT,
) -> bool:
    """:func:`cnibench.engine.engine_down`, then the ``/lib/modules`` made for kind goes once no
    engine is left."""
    return engine.engine_down(
        name, purge=purge, environ=environ, timeout=timeout, when_none_left=_release
    )


def clean_engines(
    *,
    dry_run: bool = False,
    environ: Mapping[str, str] | None = None,
    clean_for: Collection[int] = (),
    clusters_left: Mapping[str, Sequence[str]] | None = None,
) -> engine.EngineCleanReport:
    """:func:`cnibench.engine.clean_engines`, with :func:`engine_down`'s last step."""
    return engine.clean_engines(
        dry_run=dry_run,
        environ=environ,
        clean_for=clean_for,
        clusters_left=clusters_left,
        when_none_left=_release,
    )
