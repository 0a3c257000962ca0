"""Which kernel threads receive for an interface: threaded NAPI pollers found over netlink.

With ``napi=threaded`` a node receives its packets in kernel threads of its own
(``/sys/class/net/<dev>/threaded``), instead of in the softirq of whichever process sent them.
Those threads are then counted as the node's: the lab moves them into the node's cgroup
(:mod:`cnibench.backends.lab.cgroups`), kind adds their CPU time to the node container's
(:mod:`cnibench.backends.kube.node_usage`), so that what a node spends forwarding (an egress
gateway, a router) is counted as that node's CPU.

A thread's PID is reported by the generic netlink family ``netdev`` (``napi-get``, Linux 6.9
and later). Interface names repeat across namespaces (every node has an ``eth0``), so the
query is made from inside the node's namespace: a short-lived thread of this process joins it
with ``setns(2)``, which changes only that thread, and opens its netlink socket there.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import threading
from collections.abc import Iterator, Sequence

from cnibench.errors import ProvisioningError

__all__ = ["napi_thread_pids"]

_NETLINK_GENERIC = 16
_CLONE_NEWNET = 0x40000000
_NLMSG_ERROR = 2
_NLMSG_DONE = 3
_NLM_F_REQUEST = 0x1
_NLM_F_ACK = 0x4
_NLM_F_DUMP = 0x300
_GENL_ID_CTRL = 0x10
_CTRL_CMD_GETFAMILY = 3
_CTRL_ATTR_FAMILY_ID = 1
_CTRL_ATTR_FAMILY_NAME = 2
_NETDEV_CMD_NAPI_GET = 11
_NETDEV_A_NAPI_IFINDEX = 1
_NETDEV_A_NAPI_ID = 2
_NETDEV_A_NAPI_PID = 4
_NLA_TYPE_MASK = 0x3FFF


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("HH", length, kind) + payload + b"\0" * ((4 - length % 4) % 4)


def _attrs(data: bytes) -> Iterator[tuple[int, bytes]]:
    offset = 0
    while offset + 4 <= len(data):
        length, kind = struct.unpack_from("HH", data, offset)
        if length < 4:
            return
        yield kind & _NLA_TYPE_MASK, data[offset + 4 : offset + length]
        offset += (length + 3) & ~3


def _request(sock: socket.socket, family: int, flags: int, cmd: int, attrs: bytes) -> list[bytes]:
    """Send one generic netlink request; return the payloads (after genlmsghdr) of the answer."""
    body = struct.pack("BBH", cmd, 1, 0) + attrs
    sock.send(struct.pack("IHHII", 16 + len(body), family, _NLM_F_REQUEST | flags, 1, 0) + body)
    payloads: list[bytes] = []
    while True:
        data = sock.recv(65536)
        offset = 0
        while offset + 16 <= len(data):
            length, kind, _flags, _seq, _pid = struct.unpack_from("IHHII", data, offset)
            if length < 16:
                raise OSError("malformed netlink message")
            message = data[offset + 16 : offset + length]
            offset += (length + 3) & ~3
            if kind == _NLMSG_DONE:
                return payloads
            if kind == _NLMSG_ERROR:
                code = struct.unpack_from("i", message)[0]
                if code:
                    raise OSError(-code, os.strerror(-code))
                return payloads  # the ACK of a non-dump request
            payloads.append(message[4:])
        if not flags & _NLM_F_DUMP and payloads:
            return payloads


def _netdev_family(sock: socket.socket) -> int:
    name = _attr(_CTRL_ATTR_FAMILY_NAME, b"netdev\0")
    for payload in _request(sock, _GENL_ID_CTRL, 0, _CTRL_CMD_GETFAMILY, name):
        for kind, value in _attrs(payload):
            if kind == _CTRL_ATTR_FAMILY_ID:
                return int(struct.unpack("H", value[:2])[0])
    raise OSError("the netdev generic netlink family has no id")


def _pids_here(ifindex: int) -> list[int]:
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_GENERIC) as sock:
        sock.settimeout(5.0)
        family = _netdev_family(sock)
        query = _attr(_NETDEV_A_NAPI_IFINDEX, struct.pack("I", ifindex))
        pids = []
        for payload in _request(sock, family, _NLM_F_DUMP, _NETDEV_CMD_NAPI_GET, query):
            fields = dict(_attrs(payload))
            if _NETDEV_A_NAPI_PID in fields and _NETDEV_A_NAPI_ID in fields:
                pids.append(int(struct.unpack("I", fields[_NETDEV_A_NAPI_PID][:4])[0]))
        return sorted(pids)


def napi_thread_pids(namespace: str, interfaces: Sequence[str]) -> dict[str, list[int]]:
    """PIDs of the threaded NAPI pollers of ``interfaces`` in the network namespace whose file
    is ``namespace`` (``/run/netns/<name>``, ``/proc/<pid>/ns/net``).

    An interface without threaded NAPI has an empty list.

    Raises
    ------
    ProvisioningError
        If the namespace cannot be joined, an interface does not exist, or the kernel has no
        ``netdev`` netlink family.
    """
    found: dict[str, list[int]] = {}
    failure: list[BaseException] = []

    def query() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(namespace, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if libc.setns(fd, _CLONE_NEWNET) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, os.strerror(code))
            finally:
                os.close(fd)
            for name in interfaces:
                found[name] = _pids_here(socket.if_nametoindex(name))
        except (OSError, struct.error) as exc:
            failure.append(exc)

    # The thread ends in the namespace it joined; no other thread of the process changes.
    worker = threading.Thread(target=query, name="napi-query", daemon=True)
    worker.start()
    worker.join(10.0)
    if worker.is_alive():
        raise ProvisioningError(f"list the NAPI threads of {namespace}: no answer in 10 s")
    if failure:
        raise ProvisioningError(f"list the NAPI threads of {namespace}: {failure[0]}")
    return found
