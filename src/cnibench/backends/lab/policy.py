"""Policy, L7 filter and traffic split of the lab, as pure functions returning ruleset text.

Nothing here runs a command: :class:`~cnibench.backends.lab.filters.LabFilters` and
:class:`~cnibench.backends.lab.split.LabSplit` feed the returned text to ``nft -f -`` /
``iptables-restore`` / nginx in the right namespace.

Network policy (:func:`nft_policy_ruleset`, :func:`iptables_policy_restore`) is enforced in the
forward path of the *target's node*, which every packet to the target crosses whether the client
is on the same node or another one. The three engines differ only in how a packet is matched:

* ``iptables``: one chain with one rule per (source, port range), walked in order,
* ``nftables``: one chain with one rule per port range (sources in an anonymous set), in order,
* ``nftables-set``: one lookup of ``(source . port)`` in an interval set holding every rule.

With ``rules_see=new-connections`` the chain starts with ``ct state established,related
accept`` (as real CNIs do), so the rules cost only the first packet of each connection; with
``every-packet`` that shortcut is absent and every packet to the target walks them.

A priority case (:func:`nft_priority_ruleset`) becomes one nftables chain per policy layer in
the reference order, a ``kubernetes`` chain and a ``baseline`` chain, all in the forward path
of the target's node, so the kernel, not Python, decides what a probe sees.

The L7 filter (:func:`l7_proxy_config`, :func:`l7_redirect_ruleset`) is an nginx on the target's
node to which an nftables ``redirect`` sends the target's HTTP traffic; it forwards only the
allowed method and path and answers everything else with 403. The traffic split
(:func:`split_proxy_config`, :func:`split_dnat_ruleset`) is an nginx with a weighted
``upstream`` in a gateway pod, published on its node's underlay address like a LoadBalancer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from cnibench.errors import ConfigError
from cnibench.policy import (
    PolicyAction,
    PolicyEngine,
    PolicySpec,
    PortRange,
    PriorityCase,
    PriorityLayer,
    RulesSee,
    filler_rules,
)

__all__ = [
    "IPTABLES_CHAIN",
    "L7_PROXY_PORT",
    "iptables_policy_removal",
    "iptables_policy_restore",
    "l7_proxy_config",
    "l7_redirect_ruleset",
    "nft_policy_ruleset",
    "nft_priority_ruleset",
    "nft_table_removal",
    "policy_table",
    "split_dnat_ruleset",
    "split_proxy_config",
]

IPTABLES_CHAIN = "CNIBENCH-POLICY"
L7_PROXY_PORT = 15001
"""Port of the L7 proxy in the node namespace (Envoy's customary inbound port)."""
_PATH_RE = re.compile(r"^/[A-Za-z0-9._~/-]*$")
_METHOD_RE = re.compile(r"^[A-Z]{3,10}$")


def policy_table(lab_id: str, feature: str) -> str:
    """Name of the nftables table of ``feature`` (``pol``, ``l7``, ``split``) in a lab."""
    return f"{lab_id}_{feature}"


def _nft_ports(ports: Sequence[PortRange]) -> str:
    items = ", ".join(str(p) for p in ports)
    return f"{{ {items} }}" if len(ports) > 1 else items


def _nft_header(table: str) -> list[str]:
    # Declaring then deleting makes the load atomic and idempotent.
    return [f"table ip {table}", f"delete table ip {table}", f"table ip {table} {{"]


def nft_policy_ruleset(spec: PolicySpec, *, table: str, engine: PolicyEngine) -> str:
    """nftables ruleset (for ``nft -f -``) enforcing ``spec`` with ``engine``.

    Parameters
    ----------
    spec:
        The policy.
    table:
        Table name (replaced atomically), see :func:`policy_table`.
    engine:
        ``nftables`` (linear rules) or ``nftables-set`` (one set lookup).

    Raises
    ------
    ConfigError
        For the ``iptables`` engine (use :func:`iptables_policy_restore`).
    """
    if engine is PolicyEngine.IPTABLES:
        raise ConfigError("the iptables engine is rendered by iptables_policy_restore")
    proto = spec.protocol.value
    lines = [
        *_nft_header(table),
        "  chain forward {",
        "    type filter hook forward priority filter; policy accept;",
        f"    ip daddr {spec.target.ip} jump ingress",
        "  }",
    ]
    if engine is PolicyEngine.NFTABLES_SET:
        elements = [f"{peer.ip} . {ports}" for peer, ports in filler_rules(spec)]
        elements += [f"{peer.ip} . {ports}" for peer in spec.allowed for ports in spec.ports]
        lines += [
            "  set allowed {",
            "    type ipv4_addr . inet_service; flags interval;",
            f"    elements = {{ {', '.join(elements)} }}",
            "  }",
        ]
    lines += ["  chain ingress {"]
    if spec.rules_see is RulesSee.NEW_CONNECTIONS:
        lines.append("    ct state established,related accept")
    if engine is PolicyEngine.NFTABLES_SET:
        lines.append(f"    meta l4proto {proto} ip saddr . th dport @allowed accept")
    else:
        lines += [
            f"    ip saddr {peer.ip} {proto} dport {ports} accept"
            for peer, ports in filler_rules(spec)
        ]
        sources = ", ".join(peer.ip for peer in spec.allowed)
        lines.append(
            f"    ip saddr {{ {sources} }} {proto} dport {_nft_ports(spec.ports)} accept"
            f' comment "allow {spec.target.name}"'
        )
    lines += ["    drop", "  }", "}"]
    return "\n".join(lines) + "\n"


def nft_table_removal(table: str) -> str:
    """nftables script removing ``table`` if it exists."""
    return f"table ip {table}\ndelete table ip {table}\n"


_LAYER_VERDICTS = {
    PolicyAction.ALLOW: "accept",
    PolicyAction.DENY: "drop",
    # Layer chains are entered by ``goto`` from ``ingress``'s one ``jump``, so ``return`` leaves
    # the whole tiered chain sequence and ``ingress`` continues with the Kubernetes chain.
    PolicyAction.PASS: "return",
}


def _layer_chain(index: int, layer: PriorityLayer) -> str:
    return f"layer{index}_{layer.tier}"


def nft_priority_ruleset(case: PriorityCase, spec: PolicySpec, *, table: str) -> str:
    """nftables ruleset (for ``nft -f -``) stacking every policy of ``case`` on ``spec.target``.

    ``ingress`` (entered for packets to the target) accepts established flows, then jumps
    once into the tiered layers, then into ``kubernetes``, then into ``baseline``, and accepts
    what none of them decided. The tiered layers are one chain each, ordered by
    ``(tier rank, priority)`` and linked by ``goto``: a layer's rule matches ``spec.allowed``
    to ``spec.ports`` and accepts (allow), drops (deny) or returns to ``ingress`` (pass,
    skipping the remaining tiered layers); a packet it does not match goes on to the next
    layer. ``kubernetes`` drops everything when ``case.kubernetes_deny`` (a NetworkPolicy
    selecting the target with no ingress rule) and is empty otherwise. ``baseline`` holds the
    baseline-tier layers in priority order.

    Parameters
    ----------
    case:
        The priority case.
    spec:
        Target, the peers every layer names, and the ports (``extra_rules`` is ignored).
    table:
        Table name (replaced atomically), see :func:`policy_table`.
    """
    proto = spec.protocol.value
    sources = ", ".join(peer.ip for peer in spec.allowed)
    match = f"ip saddr {{ {sources} }} {proto} dport {_nft_ports(spec.ports)}"
    ordered = case.ordered_layers
    tiered = [(i, layer) for i, layer in enumerate(ordered) if not layer.baseline]
    baseline = [layer for layer in ordered if layer.baseline]
    lines = [
        *_nft_header(table),
        "  chain forward {",
        "    type filter hook forward priority filter; policy accept;",
        f"    ip daddr {spec.target.ip} jump ingress",
        "  }",
        "  chain ingress {",
        "    ct state established,related accept",
    ]
    if tiered:
        lines.append(f"    jump {_layer_chain(*tiered[0])}")
    lines += ["    jump kubernetes", "    jump baseline", "    accept", "  }"]
    for position, (index, layer) in enumerate(tiered):
        lines += [
            f"  chain {_layer_chain(index, layer)} {{",
            f'    {match} counter {_LAYER_VERDICTS[layer.action]} comment "{layer}"',
        ]
        if position + 1 < len(tiered):
            lines.append(f"    goto {_layer_chain(*tiered[position + 1])}")
        lines.append("  }")
    lines.append("  chain kubernetes {")
    if case.kubernetes_deny:
        lines.append('    counter drop comment "kubernetes deny-all"')
    lines += ["  }", "  chain baseline {"]
    lines += [
        f'    {match} counter {_LAYER_VERDICTS[layer.action]} comment "{layer}"'
        for layer in baseline
    ]
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def iptables_policy_restore(spec: PolicySpec, *, chain: str = IPTABLES_CHAIN) -> str:
    """``iptables-restore`` input enforcing ``spec`` in the filter table's FORWARD chain.

    One rule per (source, port range): non-matching rules first, then one per allowed peer and
    port range, then DROP. The whole filter table is replaced (the node uses it for nothing else).
    """
    proto = spec.protocol.value
    lines = [
        "*filter",
        ":INPUT ACCEPT [0:0]",
        ":FORWARD ACCEPT [0:0]",
        ":OUTPUT ACCEPT [0:0]",
        f":{chain} - [0:0]",
        f"-A FORWARD -d {spec.target.ip}/32 -j {chain}",
    ]
    if spec.rules_see is RulesSee.NEW_CONNECTIONS:
        lines.append(f"-A {chain} -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT")

    def rule(ip: str, ports: PortRange) -> str:
        dport = str(ports.first) if ports.first == ports.last else f"{ports.first}:{ports.last}"
        return f"-A {chain} -s {ip}/32 -p {proto} -m {proto} --dport {dport} -j ACCEPT"

    lines += [rule(peer.ip, ports) for peer, ports in filler_rules(spec)]
    lines += [rule(peer.ip, ports) for peer in spec.allowed for ports in spec.ports]
    lines += [f"-A {chain} -j DROP", "COMMIT"]
    return "\n".join(lines) + "\n"


def iptables_policy_removal() -> str:
    """``iptables-restore`` input emptying the filter table (undoes the policy)."""
    return "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"


def _check_http(method: str, path: str) -> None:
    if not _METHOD_RE.match(method):
        raise ConfigError(f"L7 method {method!r} must be an upper-case HTTP method such as GET")
    if not _PATH_RE.match(path):
        raise ConfigError(
            f"L7 path {path!r} must start with '/' and use only letters, digits, '._~/-'"
        )


def _nginx_prelude(run_dir: Path, *, workers: int, connections: int) -> list[str]:
    return [
        f"worker_processes {workers};",
        "worker_rlimit_nofile 20000;",
        f"pid {run_dir / 'nginx.pid'};",
        f"error_log {run_dir / 'nginx-error.log'} warn;",
        "events {",
        f"  worker_connections {connections};",
        "}",
        "http {",
        "  access_log off;",
        f"  client_body_temp_path {run_dir}/temp-body;",
        f"  proxy_temp_path {run_dir}/temp-proxy;",
        f"  fastcgi_temp_path {run_dir}/temp-fastcgi;",
        f"  uwsgi_temp_path {run_dir}/temp-uwsgi;",
        f"  scgi_temp_path {run_dir}/temp-scgi;",
        "  keepalive_requests 100000;",
    ]


def l7_proxy_config(
    *, server_ip: str, server_port: int, method: str, path: str, run_dir: Path
) -> str:
    """nginx configuration of the transparent L7 filter in front of ``server_ip:server_port``.

    Requests with exactly ``method`` on exactly ``path`` are forwarded (upstream connections are
    kept alive, so the node does not run out of ephemeral ports under ``ab`` without
    keep-alive); anything else gets 403 from the proxy itself.

    Raises
    ------
    ConfigError
        A method that is not an upper-case token, or a path with characters outside
        ``A-Za-z0-9._~/-``.
    """
    _check_http(method, path)
    return "\n".join(
        [
            *_nginx_prelude(run_dir, workers=2, connections=8192),
            "  upstream protected {",
            f"    server {server_ip}:{server_port};",
            "    keepalive 256;",
            "  }",
            "  server {",
            f"    listen {L7_PROXY_PORT} reuseport backlog=4096;",
            f"    location = {path} {{",
            f"      if ($request_method != {method}) {{ return 403; }}",
            "      proxy_pass http://protected;",
            "      proxy_http_version 1.1;",
            '      proxy_set_header Connection "";',
            "    }",
            "    location / {",
            "      return 403;",
            "    }",
            "  }",
            "}",
            "",
        ]
    )


def l7_redirect_ruleset(*, table: str, server_ip: str, server_port: int) -> str:
    """nftables ruleset redirecting TCP to ``server_ip:server_port`` to the local L7 proxy."""
    return "\n".join(
        [
            *_nft_header(table),
            "  chain prerouting {",
            "    type nat hook prerouting priority dstnat; policy accept;",
            f"    ip daddr {server_ip} tcp dport {server_port} redirect to :{L7_PROXY_PORT}",
            "  }",
            "}",
            "",
        ]
    )


def split_proxy_config(
    *, listen_ip: str, port: int, backends: Mapping[str, tuple[str, int]], run_dir: Path
) -> str:
    """nginx configuration of a weighted HTTP proxy (the lab's Gateway API HTTPRoute).

    Parameters
    ----------
    listen_ip, port:
        Where the proxy listens.
    backends:
        Backend name to ``("ip:port", weight)``; weight-0 backends are left out of the
        upstream (they must receive nothing). Responses pass through unchanged, including each
        backend's ``X-Backend`` header.
    run_dir:
        Directory for pid, log and temp files.

    Raises
    ------
    ConfigError
        A negative weight, or no positive weight.
    """
    for name, (_, weight) in backends.items():
        if weight < 0:
            raise ConfigError(f"split weight of {name!r} must be >= 0, got {weight}")
    servers = [
        f"    server {address} weight={weight};  # {name}"
        for name, (address, weight) in backends.items()
        if weight > 0
    ]
    if not servers:
        raise ConfigError("a split needs at least one backend with a positive weight")
    return "\n".join(
        [
            *_nginx_prelude(run_dir, workers=2, connections=8192),
            "  upstream split {",
            # Without a shared zone every worker keeps its own round-robin state, and the
            # split of a run is exact only per worker (off by one or two in total).
            "    zone split 64k;",
            *servers,
            "    keepalive 256;",
            "  }",
            "  server {",
            # reuseport: the kernel spreads connections over both workers.
            f"    listen {listen_ip}:{port} backlog=4096 reuseport;",
            "    location / {",
            "      proxy_pass http://split;",
            "      proxy_http_version 1.1;",
            '      proxy_set_header Connection "";',
            "    }",
            "  }",
            "}",
            "",
        ]
    )


def split_dnat_ruleset(*, table: str, node_ip: str, gateway_ip: str, port: int) -> str:
    """nftables ruleset publishing the gateway pod's ``port`` on its node's underlay address."""
    return "\n".join(
        [
            *_nft_header(table),
            "  chain prerouting {",
            "    type nat hook prerouting priority dstnat; policy accept;",
            f"    ip daddr {node_ip} tcp dport {port} dnat to {gateway_ip}:{port}",
            "  }",
            "}",
            "",
        ]
    )
