"""The images of the offline set: each pod image imported from a root filesystem plus built
files (``docker import``), kind's base image, and the kind node image with the runtime images
kubeadm pulls imported into its containerd."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cnibench.backends.kube.build_recipes import ImageRecipe
from cnibench.backends.kube.offline.core import BuildContext
from cnibench.backends.kube.offline.gobuilds import GoBuilds
from cnibench.backends.kube.offline.recipes import (
    ROOTFS_PACKAGES,
    OfflineVersions,
    containerd_config,
    recipe_digest,
    runtime_images,
)
from cnibench.backends.kube.offline.rootfs import RootFilesystems
from cnibench.errors import ProvisioningError

__all__ = ["ImageAssembly", "base_image_tag"]

_NODE_RECIPE = "node-1"
"""Bumped when the way kind's base image is made changes without its versions changing."""


def base_image_tag(versions: OfflineVersions) -> str:
    """The tag of kind's base image for ``versions`` (kept in the engine to rebuild the node
    image from; :mod:`.prune` keeps it)."""
    digest = recipe_digest(_NODE_RECIPE, versions, ROOTFS_PACKAGES["node"])
    return f"localhost/cnibench-kind-base:{digest}"


_STORAGE_CLASS = """\
# kind applies /kind/manifests/default-storage.yaml at creation; the offline node image has no
# provisioner image, so only the class is declared (cnibench's pods use no volumes).
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
"""


class ImageAssembly:
    """The image steps of :class:`~.builder.OfflineBuilder` (they need an engine).

    Parameters
    ----------
    context:
        The build's cache, versions, images and commands.
    go:
        The Go builds, whose artefacts go into the images.
    rootfs:
        The root filesystems the images are made from.
    """

    def __init__(self, context: BuildContext, go: GoBuilds, rootfs: RootFilesystems) -> None:
        self.context = context
        self._commands = context.commands
        self._go = go
        self._rootfs = rootfs

    def import_image(self, recipe: ImageRecipe) -> None:
        """``docker import`` of the recipe's root filesystem plus files, unless present."""
        if self._commands.image_exists(recipe.tag):
            self.context.report.reused.append(recipe.tag)
            return
        artefacts = self._go.artefacts()
        with (
            self.context.step(f"image {recipe.tag}"),
            tempfile.TemporaryDirectory(dir=self.context.offline) as tmp,
        ):
            tar_path = Path(tmp) / "image.tar"
            removed = {p.strip("/") for p in recipe.remove}
            base = self._rootfs.rootfs(recipe.rootfs) if recipe.rootfs else None
            with tarfile.open(tar_path, "w") as tar:
                if base is not None:

                    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
                        name = info.name.removeprefix("./")
                        return None if name in removed or name == ".cnibench-recipe" else info

                    tar.add(base, arcname=".", filter=keep)
                for inside, artefact in sorted(recipe.files.items()):
                    _add_parents(tar, inside, present=base)
                    path = self._go.artefact(artefact, artefacts)
                    info = tar.gettarinfo(str(path), arcname=inside.lstrip("/"))
                    info.mode = 0o755
                    info.uid = info.gid = 0
                    info.uname = info.gname = "root"
                    with path.open("rb") as handle:
                        tar.addfile(info, handle)
                for inside, artefact in sorted(recipe.trees.items()):
                    _add_parents(tar, inside, present=base)
                    tar.add(
                        self._go.artefact(artefact, artefacts),
                        arcname=inside.strip("/"),
                        filter=_owned_by_root,
                    )
                for inside, target in sorted(recipe.links.items()):
                    _add_parents(tar, inside, present=base)
                    info = tarfile.TarInfo(inside.strip("/"))
                    info.type = tarfile.SYMTYPE
                    info.linkname = target
                    info.mode = 0o777
                    tar.addfile(info)
            changes = [arg for change in recipe.changes() for arg in ("--change", change)]
            self._commands.docker("import", *changes, str(tar_path), recipe.tag, step="images")
        self.context.report.built.append(recipe.tag)

    def _add_stopsignal(self, source: str, tag: str) -> None:
        # `docker import/commit --change` refuse STOPSIGNAL; a one-line build adds it.
        with tempfile.TemporaryDirectory(dir=self.context.offline) as context:
            Path(context, "Dockerfile").write_text(f"FROM {source}\nSTOPSIGNAL SIGRTMIN+3\n")
            self._commands.docker(
                "build", "--network", "none", "-q", "-t", tag, context, step="images"
            )

    def base_image(self) -> str:
        """kind's base image (``images/base`` of the kind module) on a Debian node rootfs."""
        v = self.context.versions
        kind_files = (
            self._commands.module_dir("sigs.k8s.io/kind", v.kind) / "images" / "base" / "files"
        )
        tag = base_image_tag(v)
        digest = tag.rpartition(":")[2]
        if self._commands.image_exists(tag):
            self.context.report.reused.append(tag)
            return tag
        with self.context.step("kind base image"):
            rootfs = self._rootfs.rootfs("node")
            work = self.context.offline / "work" / f"base-{digest}"
            shutil.rmtree(work, ignore_errors=True)
            work.parent.mkdir(parents=True, exist_ok=True)
            # A copy of the node's root filesystem: gone with the step, also when one of its
            # commands fails (a failed build left hundreds of MB behind in the cache).
            try:
                self._commands.run(["cp", "-a", str(rootfs), str(work)], step="base")
                _install_kind_base_files(kind_files, work)
                config = containerd_config(
                    (kind_files / "etc/containerd/config.toml").read_text(), pause_tag=v.pause
                )
                (work / "etc/containerd/config.toml").write_text(config)
                for name in ("containerd", "containerd-shim-runc-v2", "ctr"):
                    _symlink(work / "usr/local/bin" / name, f"/usr/bin/{name}")
                _symlink(work / "usr/local/sbin/runc", "/usr/sbin/runc")
                spec = json.loads(
                    self._commands.run(["chroot", str(work), "ctr", "oci", "spec"], step="base")
                )
                spec.setdefault("hooks", {}).setdefault("createContainer", []).append(
                    {"path": "/kind/bin/mount-product-files.sh"}
                )
                spec.get("process", {}).pop("rlimits", None)
                (work / "etc/containerd/cri-base.json").write_text(json.dumps(spec, indent=2))
                cni_dir = work / "opt/cni/bin"
                cni_dir.mkdir(parents=True, exist_ok=True)
                for name, path in self._go.artefacts().items():
                    if name.startswith("cni/"):
                        shutil.copy2(path, cni_dir / name.removeprefix("cni/"))
                self._commands.run(
                    ["chroot", str(work), "/bin/bash", "-c", _SYSTEMD_SETUP], step="base"
                )
                stage = f"localhost/cnibench-kind-base-stage:{digest}"
                self._import_dir(
                    work,
                    stage,
                    [
                        "ENV container=docker",
                        'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]',
                    ],
                )
                self._add_stopsignal(stage, tag)
                self._commands.docker("rmi", stage, step="images")
            finally:
                shutil.rmtree(work, ignore_errors=True)
        self.context.report.built.append(tag)
        return tag

    def _import_dir(self, directory: Path, tag: str, changes: Sequence[str]) -> None:
        args = [arg for change in changes for arg in ("--change", change)]
        self._pipe(["tar", "-C", str(directory), "-c", "."], ["import", *args, "-", tag], "images")

    def _pipe(self, producer: Sequence[str], docker_args: Sequence[str], step: str) -> None:
        """``producer | docker <docker_args>``; either failing fails the step."""
        env = dict(self.context.environ, DOCKER_HOST=self._commands.docker_host)
        source = subprocess.Popen(list(producer), stdout=subprocess.PIPE, env=env)
        try:
            assert source.stdout is not None
            self._commands.docker(*docker_args, step=step, stdin=source.stdout.fileno())
        finally:
            if source.stdout is not None:
                source.stdout.close()
            if source.wait() != 0:
                raise ProvisioningError(
                    f"{' '.join(producer[:3])} failed (exit {source.returncode})"
                )

    def node_image(self) -> str:
        """The kind node image: base + kubelet/kubeadm/kubectl + the runtime images imported
        into its containerd (what ``kind build node-image`` does)."""
        tag = self.context.images.kind_node
        if self._commands.image_exists(tag):
            self.context.report.reused.append(tag)
            return tag
        base = self.base_image()
        for recipe in runtime_images(self.context.versions):
            self.import_image(recipe)
        with self.context.step(f"node image {tag}"):
            builder = f"cnibench-node-build-{os.getpid()}"
            if self._commands.inspectable("container", builder):  # left by an interrupted build
                self._commands.docker("rm", "-f", "-v", builder, step="node-image")
            self._commands.docker(
                "run",
                "-d",
                "--pull",
                "never",
                "--name",
                builder,
                "--privileged",
                "--network",
                "none",
                "--entrypoint",
                "sleep",
                base,
                "infinity",
                step="node-image",
            )
            try:
                bins = self.context.kubernetes_bin
                for command in ("kubelet", "kubeadm", "kubectl"):
                    self._commands.docker(
                        "cp",
                        str(bins / command),
                        f"{builder}:/usr/bin/{command}",
                        step="node-image",
                    )
                with tempfile.NamedTemporaryFile(
                    "w", dir=self.context.offline, suffix=".yaml"
                ) as storage:
                    storage.write(_STORAGE_CLASS)
                    storage.flush()
                    self._commands.docker(
                        "exec", builder, "mkdir", "-p", "/kind/manifests", step="node-image"
                    )
                    self._commands.docker(
                        "cp",
                        storage.name,
                        f"{builder}:/kind/manifests/default-storage.yaml",
                        step="node-image",
                    )
                self._commands.docker(
                    "exec",
                    builder,
                    "sh",
                    "-c",
                    f"printf %s {self.context.versions.kubernetes} > /kind/version",
                    step="node-image",
                )
                self._commands.docker(
                    "exec",
                    "-d",
                    builder,
                    "sh",
                    "-c",
                    "containerd > /tmp/containerd.log 2>&1",
                    step="node-image",
                )
                self._commands.docker(
                    "exec",
                    builder,
                    "sh",
                    "-c",
                    "for i in $(seq 1 30); do ctr version >/dev/null 2>&1 && exit 0; sleep 1; done;"
                    " exit 1",
                    step="node-image",
                )
                for recipe in runtime_images(self.context.versions):
                    self._pipe_image(recipe.tag, builder)
                self._commands.docker(
                    "exec",
                    builder,
                    "sh",
                    "-c",
                    "kill $(pidof containerd); while pidof containerd >/dev/null; do sleep 0.2;"
                    " done; rm -rf /tmp/*",
                    step="node-image",
                )
                stage = f"{tag}-stage"
                self._commands.docker(
                    "commit",
                    "--change",
                    'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]',
                    "--change",
                    "CMD []",
                    builder,
                    stage,
                    step="node-image",
                )
            finally:
                self._commands.docker("rm", "-f", "-v", builder, step="node-image")
            self._add_stopsignal(stage, tag)
            self._commands.docker("rmi", stage, step="node-image")
        self.context.report.built.append(tag)
        return tag

    def _pipe_image(self, tag: str, container: str) -> None:
        self._pipe(
            ["docker", "save", tag],
            [
                "exec",
                "-i",
                container,
                "ctr",
                "--namespace=k8s.io",
                "images",
                "import",
                "--label=io.cri-containerd.pinned=pinned",
                "--all-platforms",
                "--no-unpack",
                "--digests",
                "-",
            ],
            "node-image",
        )


_SYSTEMD_SETUP = """\
set -e
find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
  /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
  /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
grep -q '^ReadKMsg=no' /etc/systemd/journald.conf || echo ReadKMsg=no >> /etc/systemd/journald.conf
systemctl enable kubelet.service containerd.service undo-mount-hacks.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests /var/lib/kubelet
"""
"""What kind's base Dockerfile does to systemd (kubelet and containerd started at boot, units a
container must not run masked or removed)."""


def _install_kind_base_files(files: Path, root: Path) -> None:
    """Copy kind's ``images/base/files`` into ``root`` with the modes its Dockerfile sets
    (scripts executable, configuration 0644), leaving out the fuse-overlayfs unit."""
    for source in files.rglob("*"):
        if source.is_dir() or source.name == "containerd-fuse-overlayfs.service":
            continue
        relative = source.relative_to(files)
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        executable = relative.parts[0] == "usr" or relative.parts[:2] == ("kind", "bin")
        target.chmod(0o755 if executable else 0o644)
    (root / "kind/bin").chmod(0o755)


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A tree's entry owned by root and writable by it (the module cache's copies are
    read-only)."""
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode |= 0o200
    return info


def _symlink(link: Path, target: str) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)


def _add_parents(tar: tarfile.TarFile, inside: str, *, present: Path | None) -> None:
    """Directory entries above ``inside`` that the root filesystem ``present`` lacks (docker
    refuses a layer that names a path twice)."""
    parts = inside.strip("/").split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        if present is not None and (present / "/".join(parts[:depth])).is_dir():
            continue
        info = tarfile.TarInfo("/".join(parts[:depth]))
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)
