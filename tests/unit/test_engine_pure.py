"""The private engine's pure parts: paths, dockerd's command line, ``/proc`` parsers, log
reading, and the runc shim's argument scan and spec rewrite (the engine itself runs for real in
tests/kind/test_engine.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cnibench.engine import (
    EngineCleanReport,
    capability_bounding_set,
    daemon_config,
    dockerd_argv,
    dockerd_major_version,
    engine_paths,
    is_engine_cmdline,
    last_log_problem,
    mount_points_under,
    needs_runc_shim,
    runc_shim_script,
)
from cnibench.engine.runc_shim import (
    rewrite_spec_file,
    spec_target,
    strip_config,
    strip_process,
)
from cnibench.errors import ConfigError

ENV = {"HOME": "/home/ada", "PATH": "/usr/bin"}

# /proc/self/status of a root shell in this sandbox (CapBnd lacks bit 24) and on a plain host.
STATUS_SANDBOX = """\
Name:\tcat
Umask:\t0022
State:\tR (running)
Uid:\t0\t0\t0\t0
CapInh:\t0000000000000000
CapPrm:\t000001fffeffffff
CapEff:\t000001fffeffffff
CapBnd:\t000001fffeffffff
CapAmb:\t0000000000000000
NoNewPrivs:\t0
"""
STATUS_HOST = STATUS_SANDBOX.replace("000001fffeffffff", "000001ffffffffff")

# The capability list Docker 20.10 gives a --privileged container (captured from
# config.json), in Docker's order.
PRIVILEGED = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
    "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
    "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
    "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
]  # fmt: skip
WITHOUT = [c for c in PRIVILEGED if c != "CAP_SYS_RESOURCE"]
DEFAULT_CAPS = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
]  # fmt: skip


def privileged_config() -> dict[str, Any]:
    """A bundle config.json as Docker 20.10 writes it for ``docker run --privileged`` (mounts
    and linux sections shortened)."""
    return {
        "ociVersion": "1.0.2-dev",
        "process": {
            "user": {"uid": 0, "gid": 0, "additionalGids": [0]},
            "args": ["/hello", "300"],
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "cwd": "/",
            "capabilities": {
                "bounding": list(PRIVILEGED),
                "effective": list(PRIVILEGED),
                "permitted": list(PRIVILEGED),
            },
            "oomScoreAdj": 0,
        },
        "root": {"path": "/var/lib/docker/overlay2/71f1bbffbe3d/merged"},
        "hostname": "d588024924c5",
        "mounts": [
            {
                "destination": "/proc",
                "type": "proc",
                "source": "proc",
                "options": ["nosuid", "noexec", "nodev"],
            }
        ],
        "linux": {"cgroupsPath": "/docker/d588024924c5", "namespaces": [{"type": "pid"}]},
    }


def privileged_process() -> dict[str, Any]:
    """A process spec as containerd passes it to ``runc exec --process`` for
    ``docker exec --privileged`` (all five sets, as a runtime may fill them)."""
    return {
        "user": {"uid": 0, "gid": 0},
        "args": ["/hello"],
        "env": ["PATH=/usr/bin:/bin"],
        "cwd": "/",
        "capabilities": {
            name: list(PRIVILEGED)
            for name in ("bounding", "effective", "inheritable", "permitted", "ambient")
        },
        "noNewPrivileges": False,
    }


# engine_paths


def test_default_paths_live_in_run_and_cache_directories() -> None:
    paths = engine_paths("cnibench", ENV)
    assert paths.run_dir == Path("/run/cnibench-engine/cnibench")
    assert paths.docker_host == "unix:///run/cnibench-engine/cnibench/docker.sock"
    assert paths.exec_root == Path("/run/cnibench-engine/cnibench/exec")
    assert paths.pidfile.parent == paths.log.parent == paths.shim.parent == paths.run_dir
    assert paths.data_root == Path("/home/ada/.cache/cnibench/engine/cnibench/data")


def test_xdg_cache_home_moves_the_data_root() -> None:
    paths = engine_paths("x1", {**ENV, "XDG_CACHE_HOME": "/var/cache/ada"})
    assert paths.data_root == Path("/var/cache/ada/cnibench/engine/x1/data")


def test_data_variable_names_the_data_root_itself() -> None:
    env = {**ENV, "XDG_CACHE_HOME": "/c", "CNIBENCH_ENGINE_DATA": "/srv/images"}
    assert engine_paths("x1", env).data_root == Path("/srv/images")


def test_run_variable_moves_the_run_directory() -> None:
    paths = engine_paths("x1", {**ENV, "CNIBENCH_ENGINE_RUN": "/run/cbt1"})
    assert paths.socket == Path("/run/cbt1/x1/docker.sock")
    assert paths.lock == Path("/run/cbt1/.x1.lock")


def test_engines_of_different_names_share_no_path() -> None:
    one, two = engine_paths("one", ENV), engine_paths("two", ENV)
    fields = ("run_dir", "socket", "exec_root", "pidfile", "log", "shim", "data_root", "lock")
    assert not {getattr(one, f) for f in fields} & {getattr(two, f) for f in fields}


@pytest.mark.parametrize("name", ["", "..", ".hidden", "a/b", "a b", "x" * 41], ids=repr)
def test_names_that_are_not_one_path_component_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="engine name"):
        engine_paths(name, ENV)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("CNIBENCH_ENGINE_DATA", "cache/data"), ("CNIBENCH_ENGINE_RUN", "run")],
    ids=["data", "run"],
)
def test_relative_overrides_are_refused(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"^{variable} must be an absolute path"):
        engine_paths("x1", {**ENV, variable: value})


def test_a_run_root_too_long_for_unix_sockets_is_refused() -> None:
    with pytest.raises(ConfigError, match="unix socket"):
        engine_paths("x1", {**ENV, "CNIBENCH_ENGINE_RUN": "/run/" + "r" * 80})


# dockerd_argv, daemon_config, runc_shim_script


def test_dockerd_argv_is_private_and_keeps_off_the_host_network() -> None:
    paths = engine_paths("cnibench", ENV)
    assert dockerd_argv(paths, dockerd="/usr/sbin/dockerd", runc_shim=False) == [
        "/usr/sbin/dockerd",
        "-H", "unix:///run/cnibench-engine/cnibench/docker.sock",
        "--data-root", "/home/ada/.cache/cnibench/engine/cnibench/data",
        "--exec-root", "/run/cnibench-engine/cnibench/exec",
        "--pidfile", "/run/cnibench-engine/cnibench/dockerd.pid",
        "--config-file", "/run/cnibench-engine/cnibench/daemon.json",
        "--iptables=false",
        "--ip-forward=false",
        "--ip-masq=false",
        "--bridge=none",
        "--dns", "127.0.0.1",
    ]  # fmt: skip


def test_dockerd_argv_registers_the_shim_as_default_runtime() -> None:
    paths = engine_paths("cnibench", ENV)
    plain = dockerd_argv(paths, runc_shim=False)
    assert dockerd_argv(paths, runc_shim=True) == [
        *plain,
        "--add-runtime", "cnibench-runc=/run/cnibench-engine/cnibench/runc-shim",
        "--default-runtime", "cnibench-runc",
    ]  # fmt: skip


def test_trust_key_of_old_dockerd_goes_into_the_data_root() -> None:
    paths = engine_paths("x1", ENV)
    assert daemon_config(paths, trust_key=True) == {
        "deprecated-key-path": "/home/ada/.cache/cnibench/engine/x1/data/key.json"
    }
    assert daemon_config(paths, trust_key=False) == {}


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ("Docker version 20.10.24+dfsg1, build 5d6db84\n", 20),
        ("Docker version 28.5.1, build f8215cc\n", 28),
        ("dockerd: command not found", None),
    ],
    ids=["debian-20.10", "upstream-28", "garbage"],
)
def test_dockerd_major_version(output: str, major: int | None) -> None:
    assert dockerd_major_version(output) == major


def test_shim_script_execs_the_module_file_with_every_argument() -> None:
    script = runc_shim_script("/opt/venv dir/bin/python", Path("/src/runc_shim.py"))
    assert script.startswith("#!/bin/sh\n")
    assert script.rstrip().endswith("exec '/opt/venv dir/bin/python' -I /src/runc_shim.py \"$@\"")


# capabilities


@pytest.mark.parametrize(
    ("status", "mask", "shim"),
    [
        (STATUS_SANDBOX, 0x1FFFEFFFFFF, True),
        (STATUS_HOST, 0x1FFFFFFFFFF, False),
        ("Name:\tcat\n", None, False),
    ],
    ids=["sandbox-without-bit-24", "host-with-bit-24", "no-capbnd-line"],
)
def test_bounding_set_decides_whether_runc_is_wrapped(
    status: str, mask: int | None, shim: bool
) -> None:
    assert capability_bounding_set(status) == mask
    assert needs_runc_shim(capability_bounding_set(status)) is shim


def test_only_bit_24_matters() -> None:
    assert needs_runc_shim(1 << 24) is False
    assert needs_runc_shim(0xFFFFFFFFFF & ~(1 << 24)) is True


# is_engine_cmdline


SOCKET = "unix:///run/cnibench-engine/x1/docker.sock"


@pytest.mark.parametrize(
    ("cmdline", "ours"),
    [
        (["/usr/sbin/dockerd", "-H", SOCKET, "--data-root", "/d"], True),
        (["dockerd", f"--host={SOCKET}"], True),
        (["/usr/sbin/dockerd", "-H", "unix:///run/cnibench-engine/x2/docker.sock"], False),
        (["/usr/sbin/dockerd", "-H", "fd://"], False),
        (["/usr/bin/sleep", "-H", SOCKET], False),
        ([], False),
    ],
    ids=["ours", "ours-equals-form", "other-engine", "system-dockerd", "not-dockerd", "gone"],
)
def test_only_a_dockerd_on_our_socket_is_ours(cmdline: list[str], ours: bool) -> None:
    assert is_engine_cmdline(cmdline, SOCKET) is ours


# mount_points_under (lines from /proc/self/mountinfo with the engine running one container)

MOUNTINFO = r"""27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
42 27 254:0 /tmp/cbt-data /tmp/cbt-data rw,relatime shared:1 - ext4 /dev/vda rw,discard
46 42 0:39 / /tmp/cbt-data/overlay2/7913034da6f2/merged rw shared:2 - overlay overlay rw
92 27 0:4 net:[4026532181] /run/cnibench-engine/x1/exec/netns/97fdbce87d81 rw - nsfs nsfs rw
93 27 0:4 net:[4026532182] /run/cnibench-engine/x10/exec/netns/0f1e2d3c4b5a rw - nsfs nsfs rw
94 27 254:0 /tmp/cbt-data-other /tmp/cbt-data-other rw - ext4 /dev/vda rw
95 27 0:50 / /run/cnibench-engine/x1/exec/with\040space rw - tmpfs tmpfs rw
"""


def test_mounts_under_the_roots_deepest_first() -> None:
    roots = [Path("/run/cnibench-engine/x1/exec"), Path("/tmp/cbt-data")]
    # The data root itself is a mount (dockerd binds it onto itself): it must come last.
    assert mount_points_under(MOUNTINFO, roots) == [
        "/run/cnibench-engine/x1/exec/netns/97fdbce87d81",
        "/run/cnibench-engine/x1/exec/with space",
        "/tmp/cbt-data/overlay2/7913034da6f2/merged",
        "/tmp/cbt-data",
    ]


def test_a_sibling_with_the_same_prefix_is_not_under_a_root() -> None:
    assert mount_points_under(MOUNTINFO, [Path("/run/cnibench-engine/x1/")]) == [
        "/run/cnibench-engine/x1/exec/netns/97fdbce87d81",
        "/run/cnibench-engine/x1/exec/with space",
    ]


# last_log_problem (lines as dockerd 20.10 writes them)


@pytest.mark.parametrize(
    ("log", "problem"),
    [
        (
            'time="2026-11-23T13:53:57Z" level=info msg="Starting up"\n'
            'time="2026-11-23T13:53:58Z" level=warning msg="Your kernel does not support'
            ' cgroup blkio weight"\n'
            "failed to start daemon: Error initializing network controller: bridge none\n",
            "failed to start daemon: Error initializing network controller: bridge none",
        ),
        (
            'time="2026-11-23T13:53:57Z" level=info msg="Starting up"\n'
            'time="2026-11-23T13:53:58Z" level=error msg="failed to mount overlay"'
            ' error="invalid argument" storage-driver=overlay2\n'
            'time="2026-11-23T13:53:59Z" level=info msg="stopping event stream"\n',
            "failed to mount overlay: invalid argument",
        ),
        (
            "Status: unknown flag: --deprecated-key-path\nSee 'dockerd --help'., Code: 125\n",
            "unknown flag: --deprecated-key-path",
        ),
        ('time="2026-11-23T13:53:57Z" level=info msg="Starting up"\n', "Starting up"),
        ("", "dockerd printed nothing"),
    ],
    ids=["plain-fatal-line", "logrus-error-fields", "usage-error", "only-info", "empty"],
)
def test_last_log_problem(log: str, problem: str) -> None:
    assert last_log_problem(log) == problem


def test_clean_summary_has_a_line_per_engine() -> None:
    report = EngineCleanReport((("cnibench", "stopped"), ("x1", "failed: busy")))
    assert report.summary() == "engine: cnibench: stopped\nengine: x1: failed: busy"
    assert report.failed == ("x1",)
    assert EngineCleanReport(()).summary() == "engine: nothing to clean"


# runc shim: spec_target


@pytest.mark.parametrize(
    ("argv", "target"),
    [
        (
            ["--root", "/run/x/runc/moby", "--log", "/b/log.json", "--log-format", "json",
             "create", "--bundle", "/b", "--pid-file", "/b/init.pid", "c1"],
            ("config", "/b/config.json"),
        ),
        (["--systemd-cgroup", "run", "-b", "/b2", "c1"], ("config", "/b2/config.json")),
        (["create", "--bundle=/b3", "c1"], ("config", "/b3/config.json")),
        (["run", "--pid-file", "/p", "c1"], ("config", "/cwd/config.json")),
        (["create", "--bundle", "rel", "c1"], ("config", "/cwd/rel/config.json")),
        (
            ["--root", "/r", "exec", "--process", "/tmp/runc-process1", "--detach",
             "--pid-file", "/p", "c1"],
            ("process", "/tmp/runc-process1"),
        ),
        (["exec", "-p=/tmp/p2", "c1"], ("process", "/tmp/p2")),
        (["exec", "-t", "c1", "sh", "-p", "/tmp/not-ours"], None),
        (["--root", "/r", "start", "c1"], None),
        (["--root", "create", "state", "c1"], None),
        (["delete", "--force", "c1"], None),
        ([], None),
    ],
    ids=[
        "create-as-containerd-calls-it",
        "run-short-bundle",
        "bundle-equals-form",
        "no-bundle-means-cwd",
        "relative-bundle",
        "exec-process",
        "exec-short-equals",
        "exec-without-process",
        "start",
        "global-value-named-create",
        "delete",
        "no-arguments",
    ],
)  # fmt: skip
def test_spec_target(argv: list[str], target: tuple[str, str] | None) -> None:
    assert spec_target(argv, "/cwd") == target


# runc shim: the rewrite


def test_config_loses_the_capability_in_every_set_and_nothing_else() -> None:
    config = privileged_config()
    stripped = strip_config(config)
    capabilities = stripped["process"]["capabilities"]
    assert capabilities == {"bounding": WITHOUT, "effective": WITHOUT, "permitted": WITHOUT}
    del stripped["process"]["capabilities"], config["process"]["capabilities"]
    assert stripped == config


def test_config_is_not_modified_in_place() -> None:
    config = privileged_config()
    strip_config(config)
    assert config == privileged_config()


def test_process_spec_loses_it_from_all_five_sets() -> None:
    stripped = strip_process(privileged_process())
    assert stripped["capabilities"] == {
        name: WITHOUT for name in ("bounding", "effective", "inheritable", "permitted", "ambient")
    }
    assert stripped["args"] == ["/hello"]


def test_a_default_container_is_left_as_it_is() -> None:
    config = privileged_config()
    config["process"]["capabilities"] = {"bounding": DEFAULT_CAPS, "permitted": DEFAULT_CAPS}
    assert strip_config(config) == config


def test_specs_without_capabilities_pass_through() -> None:
    assert strip_config({"ociVersion": "1.0.2"}) == {"ociVersion": "1.0.2"}
    assert strip_process({"args": ["sh"]}) == {"args": ["sh"]}


def test_spec_file_is_rewritten_in_place_with_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(privileged_config()))
    path.chmod(0o600)
    assert rewrite_spec_file(("config", str(path))) is True
    assert json.loads(path.read_text())["process"]["capabilities"]["bounding"] == WITHOUT
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_unchanged_spec_file_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "process.json"
    text = json.dumps({"args": ["sh"], "capabilities": {"bounding": DEFAULT_CAPS}}, indent=1)
    path.write_text(text)
    assert rewrite_spec_file(("process", str(path))) is False
    assert path.read_text() == text


def test_bridge_names_are_those_dockerd_leaves_on_the_host() -> None:
    from cnibench.engine import bridge_names

    networks = [
        {"Name": "bridge", "Driver": "bridge", "Id": "0" * 64, "Options": {}},
        {"Name": "host", "Driver": "host", "Id": "1" * 64},
        {"Name": "kind", "Driver": "bridge", "Id": "4f16f4515231" + "a" * 52, "Options": {}},
        {
            "Name": "named",
            "Driver": "bridge",
            "Id": "b" * 64,
            "Options": {"com.docker.network.bridge.name": "cbtest0"},
        },
    ]
    assert bridge_names(networks) == ["br-4f16f4515231", "cbtest0"]
