#!/usr/bin/env bash
# Time the README's first command, `python3 -m pip install nox && nox -s demo`, as a new user
# on a fresh machine would run it: in a fresh Debian 12 root filesystem (debootstrap's minbase
# variant with python3, pip and venv: less than a fresh machine has), with an empty pip cache
# and every apt install included (issue 34 item 11).
#
# Usage (root): bash scripts/demo-fresh-rootfs.sh prepare [BRANCH]   # debootstrap + clone
#               bash scripts/demo-fresh-rootfs.sh run                 # prints demo_seconds=N
#               bash scripts/demo-fresh-rootfs.sh remove
#
# The demo runs in a mount namespace of its own with the root filesystem a mount point of its
# own: `ip netns exec` makes / a slave mount and remounts /sys, which a plain chroot of a
# directory refuses ("mount --make-rslave /" failed: Invalid argument). The machine's CA
# bundle is copied in, since this machine's egress proxy signs TLS; a new machine has its own.
# Run it with nothing else heavy on the machine: the demo measures.
set -euo pipefail

ROOT="${CNIBENCH_FRESH_ROOT:-/var/tmp/cnibench-fresh}"
REPO="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
MIRROR="${CNIBENCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

case "${1:-}" in
prepare)
    branch="${2:-$(git -C "$REPO" rev-parse --abbrev-ref HEAD)}"
    rm -rf "$ROOT"
    started=$(date +%s)
    debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
        bookworm "$ROOT" "$MIRROR" >"$ROOT.debootstrap.log" 2>&1
    echo "debootstrap: $(($(date +%s) - started)) s (not counted)"
    echo "deb http://deb.debian.org/debian-security bookworm-security main" \
        >>"$ROOT/etc/apt/sources.list"
    git clone -q -b "$branch" "$REPO" "$ROOT/root/cnibench"
    cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
    cp "$CA_BUNDLE" "$ROOT/etc/ssl/certs/machine-ca.crt"
    ;;
run)
    [ -d "$ROOT/root/cnibench" ] || { echo "run '$0 prepare' first" >&2; exit 2; }
    exec unshare --mount --propagation private bash -euc '
        root=$1
        mount --bind "$root" "$root"
        mount -t proc proc "$root/proc"
        mount --rbind /sys "$root/sys"
        mount --rbind /dev "$root/dev"
        mount -t tmpfs tmpfs "$root/run"
        ca=/etc/ssl/certs/machine-ca.crt
        chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            PIP_BREAK_SYSTEM_PACKAGES=1 SSL_CERT_FILE=$ca PIP_CERT=$ca REQUESTS_CA_BUNDLE=$ca \
            bash -c "cd /root/cnibench && started=\$(date +%s) && rc=0 &&
                { python3 -m pip install -q nox && nox -s demo || rc=\$?; } &&
                echo demo_seconds=\$((\$(date +%s) - started)) rc=\$rc && exit \$rc"
    ' bash "$ROOT"
    ;;
remove)
    rm -rf "$ROOT" "$ROOT.debootstrap.log"
    ;;
*)
    sed -n '2,15p' "$0" >&2
    exit 2
    ;;
esac
