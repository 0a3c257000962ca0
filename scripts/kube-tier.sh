#!/usr/bin/env bash
# Build and cache the binaries of the kube test tier (SPEC section 8).
#
# kube-apiserver, kube-controller-manager and kube-scheduler are built from the Go module
# k8s.io/kubernetes through a wrapper module (the main module cannot be `go install`ed because
# its go.mod replaces the staging modules with local paths); kwok and helm come from
# `go install`; etcd comes from Debian (etcd-server). Everything lands OUTSIDE the repository in
# ${CNIBENCH_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cnibench/kube}/<k8s version>/bin and
# is reused when present, so a warm run takes seconds.
#
# Usage: bash scripts/kube-tier.sh            # build what is missing, print the bin directory
#        bash scripts/kube-tier.sh --print-dir  # only print the bin directory
#
# Builds run with `nice -n 19` and GOFLAGS=-p=2 (shared 2-core machines). A cold build takes
# about 15 minutes (apiserver ~6 min, the other two ~3.5 min each, kwok ~2 min, helm ~1 min).
set -euo pipefail

K8S_VERSION="${CNIBENCH_K8S_VERSION:-v1.33.4}"
STAGING_VERSION="v0.${K8S_VERSION#v1.}"
KWOK_VERSION="${CNIBENCH_KWOK_VERSION:-v0.7.0}"
HELM_VERSION="${CNIBENCH_HELM_VERSION:-v3.18.6}"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
CACHE_ROOT="${CNIBENCH_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cnibench/kube}"
BIN_DIR="$CACHE_ROOT/$K8S_VERSION/bin"
# Bump when the way the control plane is built changes: binaries of another recipe are rebuilt
# (a relink only, with a warm Go build cache).
RECIPE="version-ldflags-1"

if [[ "${1:-}" == "--print-dir" ]]; then
    echo "$BIN_DIR"
    exit 0
fi

export GOFLAGS="${GOFLAGS:--p=2}"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
mkdir -p "$BIN_DIR"

log() { printf '[kube-tier] %s\n' "$*" >&2; }

ensure_etcd() {
    if command -v etcd >/dev/null 2>&1; then
        return
    fi
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        log "installing etcd-server with apt-get"
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server >&2 \
            || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive \
                 apt-get install -y --no-install-recommends etcd-server >&2; }
    else
        log "etcd missing and cannot apt-get install etcd-server (need root + apt-get)"
        exit 1
    fi
}

build_control_plane() {
    local missing=()
    local built_recipe=""
    [[ -f "$BIN_DIR/.recipe" ]] && built_recipe="$(cat "$BIN_DIR/.recipe")"
    for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
        if [[ ! -x "$BIN_DIR/$cmd" || "$built_recipe" != "$RECIPE" ]]; then
            missing+=("$cmd")
        fi
    done
    [[ ${#missing[@]} -eq 0 ]] && return
    local work="$CACHE_ROOT/$K8S_VERSION/src"
    mkdir -p "$work"
    local staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go
        cloud-provider cluster-bootstrap code-generator component-base component-helpers
        controller-manager cri-api cri-client csi-translation-lib dynamic-resource-allocation
        endpointslice externaljwt kms kube-aggregator kube-controller-manager kube-proxy
        kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission
        sample-apiserver)
    {
        echo "module cnibench.local/kubetier"
        echo
        echo "go 1.24"
        echo
        echo "require k8s.io/kubernetes $K8S_VERSION"
        echo
        echo "replace ("
        for m in "${staging[@]}"; do echo "    k8s.io/$m => k8s.io/$m $STAGING_VERSION"; done
        echo ")"
    } >"$work/go.mod"
    cat >"$work/tools.go" <<'GO'
package kubetier

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
GO
    log "resolving k8s.io/kubernetes $K8S_VERSION (go mod tidy)"
    (cd "$work" && nice -n 19 "$GO" mod tidy >&2)
    # Stamp the release version as the upstream build does, so /version answers v1.33.4 (not
    # v0.0.0-master) and version-gated clients (helm's kubeVersion checks) see the real server.
    local minor="${K8S_VERSION#v1.}"
    minor="${minor%%.*}"
    local version_flags=""
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        version_flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1"
        version_flags+=" -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    done
    for cmd in "${missing[@]}"; do
        log "building $cmd $K8S_VERSION"
        (cd "$work" && nice -n 19 "$GO" build -trimpath -ldflags="-s -w$version_flags" \
            -o "$BIN_DIR/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" >&2)
        mv "$BIN_DIR/$cmd.tmp" "$BIN_DIR/$cmd"
    done
    echo "$RECIPE" >"$BIN_DIR/.recipe"
}

go_install() {  # name module@version
    local name="$1" pkg="$2"
    [[ -x "$BIN_DIR/$name" ]] && return
    log "go install $pkg"
    GOBIN="$BIN_DIR" nice -n 19 "$GO" install -trimpath -ldflags="-s -w" "$pkg" >&2
}

ensure_etcd
build_control_plane
go_install kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
go_install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
log "ready: $BIN_DIR"
echo "$BIN_DIR"
