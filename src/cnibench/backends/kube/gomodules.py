"""Where Go modules are on this machine: the module cache and ``go env``.

Low in the kube backend (it imports none of it): the Cilium driver finds its chart in the
module cache, :func:`~cnibench.backends.kube.cni.cni_definition` the Gateway API CRDs, and the
offline builder everything it builds from.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from cnibench.errors import ProvisioningError

__all__ = ["go_env_value", "module_cache_dir"]


def module_cache_dir(module: str, version: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where ``module@version`` is (or would be) in the Go module cache (``$GOMODCACHE``, else
    ``go env GOMODCACHE``), without downloading it: how a chart built with the module (Cilium's
    ``install/kubernetes/cilium``) is found when the module cache is the only copy.

    Module paths with capitals are escaped as the cache does (``A`` -> ``!a``).
    """
    env = dict(os.environ if environ is None else environ)
    root = env.get("GOMODCACHE") or go_env_value("GOMODCACHE", env)
    if not root:
        raise ProvisioningError("go env GOMODCACHE names no module cache")
    escaped = "".join(f"!{c.lower()}" if c.isupper() else c for c in module)
    return Path(root) / f"{escaped}@{version}"


def go_env_value(name: str, environ: Mapping[str, str]) -> str:
    """``go env <name>`` in ``environ``.

    Raises
    ------
    cnibench.errors.ProvisioningError
        ``go`` cannot be run.
    """
    try:
        done = subprocess.run(
            ["go", "env", name],
            capture_output=True,
            text=True,
            env=dict(environ),
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisioningError(f"go is not usable: {exc}") from exc
    return done.stdout.strip()
