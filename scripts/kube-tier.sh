#!/usr/bin/env bash
# Build and cache the binaries of the kube test tier (SPEC section 8).
#
# kube-apiserver, kube-controller-manager and kube-scheduler come from the Go module
# k8s.io/kubernetes, built by cnibench's offline image builder (one go build of all seven
# commands, which the kind tier's node image uses too), and so is etcd; kwok and helm come
# from `go install`. Everything lands OUTSIDE the repository in
# ${CNIBENCH_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cnibench/kube}/<k8s version>/bin and
# is reused when present, so a warm run takes seconds.
#
# Usage: bash scripts/kube-tier.sh            # build what is missing, print the bin directory
#        bash scripts/kube-tier.sh --print-dir  # only print the bin directory
#
# Builds run with `nice -n 19` and GOFLAGS=-p=2 (shared 2-core machines). A cold build takes
# about 15 minutes (Kubernetes ~11 min, kwok ~2 min, helm ~1 min).
set -euo pipefail

K8S_VERSION="${CNIBENCH_K8S_VERSION:-v1.34.4}"
KWOK_VERSION="${CNIBENCH_KWOK_VERSION:-v0.7.0}"
HELM_VERSION="${CNIBENCH_HELM_VERSION:-v3.18.6}"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
CACHE_ROOT="${CNIBENCH_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cnibench/kube}"
BIN_DIR="$CACHE_ROOT/$K8S_VERSION/bin"

if [[ "${1:-}" == "--print-dir" ]]; then
    echo "$BIN_DIR"
    exit 0
fi

export GOFLAGS="${GOFLAGS:--p=2}"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
mkdir -p "$BIN_DIR"

log() { printf '[kube-tier] %s\n' "$*" >&2; }

build_control_plane() {
    # One `go build` of Kubernetes' seven commands, shared with the kind node image of the
    # offline image set (cnibench images build): the same directory, the same stamp. etcd
    # comes from the same builder (3.6, what kubeadm 1.34 runs): an API server of 1.34 on
    # Debian's etcd 3.4 turns RequestWatchProgress off and kwok's watches break.
    log "kubernetes $K8S_VERSION commands and etcd (cnibench's offline builder; cached)"
    python - "$K8S_VERSION" "$BIN_DIR" <<'PY' >&2
import sys
from pathlib import Path

from cnibench.backends.kube.offline import OfflineBuilder, OfflineVersions

builder = OfflineBuilder(
    versions=OfflineVersions(kubernetes=sys.argv[1]),
    log=lambda line: print("[kube-tier]", line, file=sys.stderr),
)
with builder.exclusive():  # not beside an `images build` building the same commands
    builder.build_kubernetes()
    etcd = Path(sys.argv[2]) / "etcd"
    etcd.unlink(missing_ok=True)
    etcd.symlink_to(builder.build_go_binaries() / "etcd")
print(etcd)
PY
}

go_install() {  # name module@version
    local name="$1" pkg="$2"
    [[ -x "$BIN_DIR/$name" ]] && return
    log "go install $pkg"
    # No debug information from the compiler (-ldflags -s -w drops it only when linking):
    # the flag of cnibench's offline builder, NO_DWARF in cnibench/backends/kube/offline/core.py.
    GOBIN="$BIN_DIR" nice -n 19 "$GO" install -trimpath -gcflags=all=-dwarf=false \
        -ldflags="-s -w" "$pkg" >&2
}

build_control_plane
go_install kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
go_install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
log "ready: $BIN_DIR"
echo "$BIN_DIR"
