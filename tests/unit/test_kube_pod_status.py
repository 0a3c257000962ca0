"""Why a pod is not Ready, read from the status the kubelet and scheduler report, and the pull
policy of images that exist only inside the cluster."""

from __future__ import annotations

from kubernetes.client import (
    V1ContainerState,
    V1ContainerStateTerminated,
    V1ContainerStateWaiting,
    V1ContainerStatus,
    V1Pod,
    V1PodCondition,
    V1PodStatus,
)

from cnibench.backends.base import NodeRole, WorkloadKind, WorkloadSpec
from cnibench.backends.kube.images import OFFLINE_IMAGES
from cnibench.backends.kube.pods import STUCK_REASONS, pod_problem
from cnibench.backends.kube.render import pod, pull_policy


def _status(name: str, state: V1ContainerState) -> V1ContainerStatus:
    return V1ContainerStatus(
        name=name, state=state, image="img", image_id="", ready=False, restart_count=0
    )


def test_a_missing_local_image_is_named_with_the_kubelets_message() -> None:
    message = 'Container image "localhost/nope:1" is not present with pull policy of Never'
    waiting = V1ContainerState(
        waiting=V1ContainerStateWaiting(reason="ErrImageNeverPull", message=message)
    )
    problem = pod_problem(
        V1Pod(status=V1PodStatus(phase="Pending", container_statuses=[_status("tools", waiting)]))
    )
    assert problem == f"container tools: ErrImageNeverPull ({message})"
    assert any(reason in problem for reason in STUCK_REASONS)


def test_an_unschedulable_pod_gives_the_schedulers_message_on_one_line() -> None:
    condition = V1PodCondition(
        type="PodScheduled",
        status="False",
        reason="Unschedulable",
        message="0/3 nodes are available:\n 3 node(s) didn't match node selector.",
    )
    problem = pod_problem(V1Pod(status=V1PodStatus(phase="Pending", conditions=[condition])))
    assert problem == (
        "not scheduled: Unschedulable 0/3 nodes are available: 3 node(s) didn't match node"
        " selector."
    )
    assert not any(reason in problem for reason in STUCK_REASONS)  # a node may still come


def test_init_containers_come_first_and_a_clean_exit_is_no_problem() -> None:
    crashed = V1ContainerState(terminated=V1ContainerStateTerminated(exit_code=127, reason="Error"))
    done = V1ContainerState(terminated=V1ContainerStateTerminated(exit_code=0))
    initialising = V1ContainerState(waiting=V1ContainerStateWaiting(reason="PodInitializing"))
    status = V1PodStatus(
        phase="Pending",
        init_container_statuses=[_status("setup", done), _status("config", crashed)],
        container_statuses=[_status("tools", initialising)],
    )
    assert pod_problem(V1Pod(status=status)) == "container config: Error with exit code 127"


def test_a_pod_starting_normally_has_no_problem() -> None:
    creating = V1ContainerState(waiting=V1ContainerStateWaiting(reason="ContainerCreating"))
    scheduled = V1PodCondition(type="PodScheduled", status="True")
    status = V1PodStatus(
        phase="Pending", conditions=[scheduled], container_statuses=[_status("tools", creating)]
    )
    assert pod_problem(V1Pod(status=status)) == "container tools: ContainerCreating"
    assert pod_problem(V1Pod(status=V1PodStatus(phase="Pending"))) == ""


def test_local_images_are_never_pulled_and_registry_images_are_pulled_if_absent() -> None:
    manifest = pod(
        "bl-srv",
        namespace="ns",
        session="s",
        role=NodeRole.SERVER,
        workloads=(WorkloadSpec(WorkloadKind.IPERF3_SERVER, 5201),),
        images=OFFLINE_IMAGES,
    )
    policies = {c["name"]: c["imagePullPolicy"] for c in manifest["spec"]["containers"]}
    assert set(policies.values()) == {"Never"}
    assert len(policies) == 2
    assert pull_policy("registry.example/tools:1") == "IfNotPresent"
    assert pull_policy("localhost:5000/tools:1") == "IfNotPresent"  # a local registry pulls
