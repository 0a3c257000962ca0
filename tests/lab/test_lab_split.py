"""Traffic split on the lab: a weighted gateway reachable from the external host."""

from __future__ import annotations

from collections import Counter

import pytest
from lab_support import HTTP_PORT, Lab

from cnibench.backends.base import NodeRole, WorkloadKind, WorkloadSpec


@pytest.fixture
def backends(lab: Lab):
    echo = (WorkloadSpec(WorkloadKind.HTTP_ECHO, HTTP_PORT),)
    pods = [lab.cluster.place(f"v{i}", role=NodeRole.SERVER, workloads=echo) for i in (1, 2)]
    try:
        yield pods
    finally:
        for pod in pods:
            lab.cluster.remove(pod)


def answers(lab: Lab, url: str, count: int) -> Counter[str]:
    # Four client threads, so that both nginx workers take connections at the same time:
    # the split must be exact across workers, not only within one.
    script = (
        "import sys, urllib.request\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "def get(_):\n"
        "    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:\n"
        "        return r.headers['X-Backend']\n"
        "with ThreadPoolExecutor(4) as pool:\n"
        "    print('\\n'.join(pool.map(get, range(int(sys.argv[2])))))\n"
    )
    import sys

    result = lab.cluster.external.run([sys.executable, "-c", script, url, str(count)], timeout=60)
    assert result.returncode == 0, result.stderr
    return Counter(result.stdout.split())


@pytest.mark.parametrize(
    ("weights", "expected"),
    [((3, 1), {"v1": 300, "v2": 100}), ((1, 0), {"v1": 400})],
    ids=["75-25", "100-0"],
)
@pytest.mark.parametrize("lab", ["routed"], indirect=True)
def test_split_follows_integer_weights_exactly(lab: Lab, backends, weights, expected) -> None:
    # nginx's smooth weighted round robin is deterministic, and its state is shared by the
    # workers: 400 requests split exactly.
    url = lab.cluster.create_split(
        {"v1": (backends[0], weights[0]), "v2": (backends[1], weights[1])}, port=HTTP_PORT
    )
    try:
        seen = answers(lab, url, 400)
    finally:
        lab.cluster.remove_split()
    assert dict(seen) == expected


@pytest.mark.parametrize("lab", ["vxlan"], indirect=True)
def test_split_url_is_the_server_nodes_underlay_address(lab: Lab, backends) -> None:
    url = lab.cluster.create_split({"v1": (backends[0], 1), "v2": (backends[1], 1)}, port=HTTP_PORT)
    lab.cluster.remove_split()
    assert url == f"http://{lab.cluster.node(NodeRole.SERVER).ip}:{HTTP_PORT}/"
