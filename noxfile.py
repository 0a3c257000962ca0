"""Sessions people and CI both use: ``nox -s demo``, ``nox -s tests``, lint, typecheck, perf;
``nox -s kind-demo`` (which CNI, on kind) and ``nox -s study``; ``nox -s bootstrap-check`` (the
README's first command in a fresh Debian root, which ``tests`` runs beside its kind tier);
``nox -s aks-validate`` (slow cold, so in neither CI nor the defaults) checks terraform/aks.

Set-up is part of each session: Python dependencies go into the session's virtualenv, system
packages (iperf3, nginx, Prometheus, ...) are installed with apt when running as root and missing
(``python -m cnibench.system --install``), and anything that could not be installed is named.
"""

from __future__ import annotations

import glob
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True

PREPARE_IMAGES = (
    "images",
    "build",
    "--cni",
    "cilium",
    "--cni",
    "kube-router",
    "--gateway",
    "traefik",
    "--load-engine",
    "locust",
    "--prepare",
)
"""What the kind tier's image builds need that takes long and no engine (see ``tests``): with
locust's root filesystem, which the kube-router module's build asks for too, so that build
goes on beside the prepare once Traefik is done instead of waiting for Cilium's (cold, run
of 2026-12-01)."""

PYTHON = False if os.environ.get("CNIBENCH_NOX_NO_VENV") else None

BUILDS_NICE_ALONE = 19
"""The background builds' autogroup nice while the ``measured`` tests run: those judge real lab
measurements, so the builds take only the CPU they leave idle."""

BUILDS_NICE_BESIDE = -3
"""The builds' autogroup nice from the kind tier's start on (about twice the weight of the
other tiers' pytest). With every cache empty the builds are the kind tier's critical path: at
an equal share they ended at minute 74 of 84 (2026-12-02, CPU busy throughout), while the other
tiers, done at minute 60, had time to spare."""


def _install(session: nox.Session, extras: str = "all,test") -> None:
    """cnibench with ``extras`` (``""``: the core alone, what ``pip install cnibench`` gives:
    the lab, the report and the gate)."""
    session.install("-e", f".[{extras}]" if extras else ".")


def _python(session: nox.Session) -> str:
    """The session's interpreter (the one cnibench is installed in)."""
    try:
        return os.path.join(session.bin, "python")
    except ValueError:  # CNIBENCH_NOX_NO_VENV: no virtualenv, the current environment
        return "python3"


def _system(session: nox.Session, *purpose: str) -> None:
    """Install the system packages (only those ``--for`` ``purpose``, when given)."""
    session.run("python", "-m", "cnibench.system", "--install", *purpose)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole suite: unit, integration, lab, reliability, kube (real apiserver), kind (real
    kind clusters from the offline image set, in a private engine), bench on lab."""
    _install(session)
    require = os.environ.get("CNIBENCH_REQUIRE", "lab,kube,kind,bootstrap")
    args = session.posargs or [
        "tests",
        "--cluster=lab",
        "--cnibench-profile=smoke",
        "-p",
        "no:cacheprovider",
        "--durations=25",
    ]
    tmp = session.create_tmp()
    # The kind tier's result sets are kept as artefacts of the run (load them with
    # cnibench.load_results); each run starts from an empty directory.
    kind_results = os.path.join(tmp, "kind-results")
    shutil.rmtree(kind_results, ignore_errors=True)
    env = {"CNIBENCH_REQUIRE": require, "CNIBENCH_KIND_RESULTS": kind_results}
    if session.posargs:
        _system(session)
        # A chosen subset: build the kube tier's binaries first (warm: seconds).
        session.run("nice", "-n", "19", "bash", "scripts/kube-tier.sh", external=True)
        session.run("python", "-m", "pytest", *args, env=env)
        return
    # The whole suite. The long builds (cold: Kubernetes' commands, kwok and helm for the kube
    # tier, about 15 minutes on 2 cores; then Cilium and the root filesystems of the offline
    # image set, about 25 minutes) run in the background, in a session whose autogroup yields
    # to the measured tests and then takes about twice the other tiers' share, as the kind
    # tier needs them (BUILDS_NICE_*). The kube and kind tiers run last (tests/conftest.py): the
    # kube tier waits for the status file of its build, the kind tier's own `images build`
    # for the builder's lock. Warm, the chain takes seconds. The Kubernetes build needs only Go
    # and cnibench, so it starts before the system packages are installed (minutes on a fresh
    # machine); the image prepare, which needs mmdebstrap, waits for them.
    status = os.path.join(tmp, "kube-build.status")
    system_done = os.path.join(tmp, "system-packages.done")
    for stale in (status, system_done):
        if os.path.exists(stale):
            os.unlink(stale)
    steps = f'bash scripts/kube-tier.sh; echo $? > "{status}"'
    if "kind" in require.split(",") and os.geteuid() == 0:
        steps += f'; while [ ! -e "{system_done}" ]; do sleep 2; done'
        steps += f"; exec {_python(session)} -m cnibench.cli {' '.join(PREPARE_IMAGES)}"
    log_path = os.path.join(tmp, "background-builds.log")
    with open(log_path, "w") as log:
        builds = subprocess.Popen(
            ["nice", "-n", "19", "bash", "-c", steps],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PATH": f"{os.path.dirname(_python(session))}:{os.environ['PATH']}"},
            start_new_session=True,  # its own process group: stopped as one below
        )
    session.log(
        f"kube tier and offline images: building in the background (pid {builds.pid}, {log_path})"
    )
    _autogroup_nice(session, builds.pid, BUILDS_NICE_ALONE)
    env["CNIBENCH_KUBE_BUILD_STATUS"] = status
    env["CNIBENCH_KUBE_BUILD_LOG"] = log_path
    kind: _Beside | None = None
    check: _Beside | None = None
    others_failed = True
    try:
        _system(session)
        with open(system_done, "w"):
            pass
        # First the tests that judge real lab measurements (marked `measured`: significance
        # at 1 %, a five-fold slowdown seen through a CPU quota), alone: beside the kind
        # tier's clusters their runs vary with its load (4 failures so measured, 2026-11-27).
        lab_tiers = ("tests/integration", "tests/lab")
        session.run("python", "-m", "pytest", *lab_tiers, "-m", "measured", *args[1:], env=env)
        # Then the kind tier, in a pytest of its own, beside everything else: it mostly waits
        # on clusters coming up, and the others' `cnibench clean` keeps what it holds
        # (cnibench.leases). Its output is printed when it ends.
        kind = _start_kind_tier(session, args[1:], env, os.path.join(tmp, "kind-tier.log"))
        # And the README's first command in a fresh Debian root (bootstrap-check), which needs
        # no tier's result: started once the measured tests are done, it ends within the kind
        # tier's time. Its lab is its own, as the bench workers' labs are.
        if "bootstrap" in require.split(","):
            check = _start_bootstrap_check(session, os.path.join(tmp, "bootstrap-check.log"))
        if builds.poll() is None:
            _autogroup_nice(session, builds.pid, BUILDS_NICE_BESIDE)
        # Beside it: the rest of the integration and lab tiers; the unit tier and the
        # benchmark suite in two xdist workers (the suite on a lab of each worker's own, as
        # `pytest tests/bench -n 2` gives a user, on one datapath: BENCH_CI_CNI); then the
        # reliability and kube tiers in one process, in the order tests/conftest.py gives.
        session.run("python", "-m", "pytest", *lab_tiers, "-m", "not measured", *args[1:], env=env)
        parallel = ("tests/unit", "tests/bench")
        bench_cni = f"--cni={BENCH_CI_CNI}"
        session.run("python", "-m", "pytest", *parallel, "-n", "2", *args[1:], bench_cni, env=env)
        ignored = [f"--ignore={tier}" for tier in (*lab_tiers, *parallel, "tests/kind")]
        session.run("python", "-m", "pytest", *args, *ignored, env=env)
        others_failed = False
    finally:
        for beside in (kind, check):
            if beside is not None:
                beside.finish(session, interrupt=others_failed)
        if builds.poll() is None:  # pytest ended before the builds did
            os.killpg(builds.pid, signal.SIGTERM)
            builds.wait()


def _autogroup_nice(session: nox.Session, leader: int, nice: int) -> None:
    """Give the session that process ``leader`` leads (started with ``start_new_session``) the
    scheduling weight of ``nice``.

    Linux's autogroups share the CPU between sessions first and only then by each process's
    nice within a session, so ``nice -n 19`` on a process of a session of its own does not make
    it yield to other sessions: the session's autogroup nice does (sched(7)). Where there is no
    autogroup, or the nice is refused (a negative one needs root), the weight stays as it is.
    """
    try:
        with open(f"/proc/{leader}/autogroup", "w") as group:
            group.write(f"{nice}\n")
    except OSError as exc:
        session.log(f"background builds: autogroup nice {nice} not set ({exc.strerror})")
        return
    session.log(f"background builds: autogroup nice {nice}")


class _Beside:
    """A check run beside the other tiers (see ``tests``): the kind tier's pytest, the
    bootstrap-check's nox."""

    def __init__(
        self,
        name: str,
        process: subprocess.Popen[bytes],
        log_path: str,
        timeout: float,
        *,
        interrupt_group: bool = False,
    ) -> None:
        self.name = name
        self.process = process
        self.log_path = log_path
        self.timeout = timeout
        self.interrupt_group = interrupt_group
        """Whether an interrupt goes to the whole process group, as Ctrl-C on a terminal does
        (the bootstrap-check's demo then cleans its lab up itself), or to the leader alone
        (pytest, which runs its own teardown)."""

    def finish(self, session: nox.Session, *, interrupt: bool) -> None:
        """Wait for it (``interrupt``: the other tiers failed; it is interrupted first, and
        its own clean-up still runs: the kind fixtures stop their engine, the demo its lab),
        print its output, and fail the session if it failed."""
        if interrupt and self.process.poll() is None:
            if self.interrupt_group:
                os.killpg(self.process.pid, signal.SIGINT)
            else:
                self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            code = self.process.wait()
        with open(self.log_path, errors="replace") as log:
            print(log.read(), flush=True)
        if code != 0 and not interrupt:
            session.error(f"{self.name} failed (exit {code}; its output is above)")


BENCH_CI_CNI = "vxlan"
"""The lab datapath CI runs the benchmark suite on. Run as a user runs it (``pytest tests/bench
-n 2``), each of the suite's conditions runs on both datapaths; CI runs each once, on the
overlay: the lab and integration tiers measure both datapaths, and the second copy took about
9 minutes of a core (its 37 tests at about 15 s each, 2026-12-03) from a cold run whose CPU
is busy throughout. The unit tier
in the same pytest reads no ``--cni``."""

KIND_TIER_SELECTION = "not kind_extended"
"""The kind checks CI runs. The ones marked ``kind_extended`` (fault injection mid-run, the
negative controls, Cilium's second cluster in kube-proxy mode, flannel's service targets and
never-ready pod: about 35 of the tier's 83 minutes alone on 2 cores, 2026-11-29) pushed CI past
its 90 minutes; ``nox -s tests -- tests/kind`` runs the whole tier, them included."""

KIND_TIER_TIMEOUT = 60 * 60
"""Seconds the kind tier may still take once the other tiers are done."""


BOOTSTRAP_CHECK_TIMEOUT = 30 * 60
"""Seconds the bootstrap-check may still take once the other tiers are done (it takes 6-10
minutes from its start)."""


def _start_bootstrap_check(session: nox.Session, log_path: str) -> _Beside:
    """``nox -s bootstrap-check`` in a process group of its own, its output to ``log_path``."""
    if os.geteuid() != 0:
        session.error(
            "bootstrap-check needs root (mmdebstrap, chroot and mounts): run the tests as root,"
            " or leave 'bootstrap' out of CNIBENCH_REQUIRE"
        )
    session.log(f"bootstrap-check: running beside the other tiers ({log_path})")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "nox", "-f", os.path.abspath(__file__), "-s", "bootstrap-check"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: killed as one on a timeout
        )
    return _Beside(
        "bootstrap-check", process, log_path, BOOTSTRAP_CHECK_TIMEOUT, interrupt_group=True
    )


def _start_kind_tier(
    session: nox.Session, args: list[str], env: dict[str, str], log_path: str
) -> _Beside:
    python = _python(session)
    session.log(f"kind tier: running beside the other tiers ({log_path})")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [python, "-m", "pytest", "tests/kind", "-m", KIND_TIER_SELECTION, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                **env,
                "PATH": f"{os.path.dirname(python)}:{os.environ['PATH']}",
            },
            start_new_session=True,  # its own process group: a Ctrl-C of nox reaches it below
        )
    return _Beside("the kind tier", process, log_path, KIND_TIER_TIMEOUT)


@nox.session(python=PYTHON)
def study(session: nox.Session) -> None:
    """The kind study (docs/findings.md): seven cluster configurations on kind, built offline,
    into docs/results/kind-<date>/ (``-- --print`` shows its plain `cnibench run` commands,
    ``-- --engine NAME`` uses another private engine). That of 2026-12-06 took 148 minutes
    warm on 2 cores (5-s measurements, the 1000-Service sweep in both sessions, egress rounds
    until decided within a 20-minute budget each; `-- --resume --out DIR` goes on with one
    stopped half-way). What it compares across configurations runs in two sessions of each."""
    _install(session)
    _system(session)
    session.run("python", "-m", "cnibench.study", *session.posargs)


@nox.session(name="kind-demo", python=PYTHON)
def kind_demo(session: nox.Session) -> None:
    """Which CNI, in one command: installs what kind needs, starts the private engine, builds
    the offline images (on a fresh machine about 41 minutes, Go modules fetched and built, then
    cached), runs flannel, Cilium and kube-router on pod-to-pod traffic and policy (quick, one
    session each: ``python -m
    cnibench.study --plan which-cni``), prints the matrices and stops the engine. Results in
    results/which-cni-<UTC time>/ (``-- --print`` shows the plain `cnibench run` commands)."""
    import datetime

    _install(session)
    _system(session, "--for", "kind")
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.join("results", f"which-cni-{stamp}")
    session.run(
        "python", "-m", "cnibench.study", "--plan", "which-cni", "--out", out, *session.posargs
    )


@nox.session(name="aks-validate", python=PYTHON)
def aks_validate(session: nox.Session) -> None:
    """terraform/aks against the azurerm provider's real schema, with no network and no Azure:
    OpenTofu and the provider built from their Go modules (cached by version under
    ~/.cache/cnibench/offline; cold, over an hour on 2 cores), then tests/aks: tofu init from a
    local mirror, validate, and tofu test (terraform/aks/tests, provider mocked), and a copy with
    a misspelt attribute that must fail validate. Not a default session, nor in CI: too slow
    cold."""
    _install(session)
    # The build is long and heavy (the provider links a binary of hundreds of MB): nice it, as
    # the tests session does its background builds.
    session.run(
        "nice", "-n", "19", _python(session), "-m", "cnibench.backends.kube.offline.tofu",
        external=True,
    )  # fmt: skip
    session.run(
        "python", "-m", "pytest", "tests/aks", "-v", "-p", "no:cacheprovider", *session.posargs,
        env={"CNIBENCH_AKS_VALIDATE": "1"},
    )  # fmt: skip


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (style and bugs) and import-linter (the layer contracts of ARCHITECTURE.md)."""
    # ruff is pinned: a new release may format differently, and CI must not fail on a
    # release day for code that did not change.
    session.install("ruff==0.17.6", "import-linter>=2.0")
    session.install("-e", ".", "--no-deps")
    checked = ("src", "tests", "bench", "noxfile.py", "scripts/bootstrap.py")
    session.run("ruff", "check", *checked)
    session.run("ruff", "format", "--check", *checked)
    session.run("lint-imports")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on src/."""
    _install(session, "dev")
    session.run("mypy")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """Set-up, then the main job on the embedded default (lab backend), quick profile: only
    the lab's system packages (no browser, compiler or container engine), and cnibench's core
    alone (no extra: the lab needs none, and the bootstrap-check proves it on a fresh root)."""
    _install(session, "")
    _system(session, "--for", "lab")
    session.run(
        "cnibench",
        "run",
        "--cluster",
        "auto",
        "--profile",
        "quick",
        # What each feature costs: seed 000's four egress cases (both datapaths), the gateway
        # node's own CPU on routed with the per-node CPU instrument (napi=threaded, which moves
        # throughput, so it is a configuration of its own and compared only as that option),
        # WireGuard on and off, and seed 003's policy precedence cases on vxlan; five runs a
        # condition. The baseline's 16 conditions would double the time: `--scenario baseline`.
        "--scenario",
        "egress@routed+vxlan+routed:napi=threaded,wireguard@vxlan,priority@vxlan",
        "--report",
        "results/report.html",
        *session.posargs,
    )


@nox.session(python=PYTHON)
def perf(session: nox.Session) -> None:
    """Speed and fidelity benchmarks, each printing ratios measured side by side in one run."""
    _install(session)
    _system(session)
    for script in sorted(os.listdir("bench")):
        if script.endswith(".py") and not script.startswith("_"):
            session.run("python", os.path.join("bench", script), *session.posargs)


BOOTSTRAP_CHECK_SUITE = "bookworm"
BOOTSTRAP_CHECK_MIRROR = "http://deb.debian.org/debian"
BOOTSTRAP_CHECK_IPTABLES = "/usr/sbin/iptables-legacy"
"""What the bootstrap-check's root selects for iptables by hand before the README's command."""
BOOTSTRAP_CHECK_IGNORED_AT_TOP = (".git", ".nox", "results")
BOOTSTRAP_CHECK_IGNORED = (
    "*.egg-info",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".import_linter_cache",
)
"""What of the working tree is not copied into the fresh root: what a clone does not have
(``results`` only at the top: ``src/cnibench/results`` is a package)."""


def _not_in_a_clone(directory: str, names: list[str]) -> set[str]:
    ignored = shutil.ignore_patterns(*BOOTSTRAP_CHECK_IGNORED)(directory, names)
    if os.path.abspath(directory) == os.path.abspath("."):
        ignored |= set(BOOTSTRAP_CHECK_IGNORED_AT_TOP) & set(names)
    return ignored


BOOTSTRAP_CHECK_RUN = r"""
root=$1; shift
trap 'umount -R "$root" 2>/dev/null || true' EXIT
# A mount point of its own: `ip netns exec` makes / a slave mount and remounts /sys, which a
# plain directory chroot refuses ("mount --make-rslave /" failed: Invalid argument).
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/run"
ca=/etc/ssl/certs/machine-ca.crt
chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    SSL_CERT_FILE=$ca PIP_CERT=$ca REQUESTS_CA_BUNDLE=$ca \
    /bin/sh -c 'cd /root/cnibench && exec "$@"' sh "$@"
"""
"""Runs its arguments in the root ``$1`` as root, with /proc, /sys, /dev and a fresh /run
mounted, in a mount namespace of its own (``unshare --propagation private``: nothing reaches
the machine's mounts, even if this is killed) and unmounted on exit all the same. The machine's
CA bundle is used because this machine's egress proxy signs TLS; a real machine has its own."""


def _readme_command(index: int) -> list[str]:
    """The README's top command ``index`` (0: the demo, 1: the tests), without its comment."""
    text = pathlib.Path("README.md").read_text()
    lines = text.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    return lines[index].split("#", 1)[0].split()


def _mounts_under(root: str) -> list[str]:
    with open("/proc/self/mountinfo") as mountinfo:
        points = [line.split()[4] for line in mountinfo]
    return [p for p in points if p == root or p.startswith(root + "/")]


def _in_root(root: str, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["chroot", root, *command], capture_output=True, text=True, check=False)


def _enabled_units(root: str) -> set[str]:
    base = os.path.join(root, "etc/systemd/system")
    found = glob.glob(f"{base}/*.wants/*") + glob.glob(f"{base}/*.requires/*")
    return {os.path.relpath(link, base) for link in found}


@nox.session(name="bootstrap-check", python=False)
def bootstrap_check(session: nox.Session) -> None:
    """The README's first command as a new user runs it: in a fresh Debian 12 root
    (``mmdebstrap --variant=minbase --include=python3,ca-certificates,iptables bookworm``, the
    tarball cached by date in ~/.cache/cnibench/mmdebstrap), as root in a chroot with /proc,
    /sys, /dev and /run mounted. The root's iptables alternative is set by hand to the legacy
    binary first (a user's own choice, which Debian's default, nft, is not), so that "left as
    it found it" is a check that can fail. Checks exit 0, the matrix printed, no unit enabled
    by the install under etc/systemd/system/*.wants and that alternative unchanged; prints
    each step's seconds. Needs root; 6-10 minutes. The tests session (CI) runs it beside the
    kind tier while ``CNIBENCH_REQUIRE`` names ``bootstrap`` (its default)."""
    import datetime
    import tempfile
    import time

    if os.geteuid() != 0:
        session.error("bootstrap-check needs root (mmdebstrap's root, chroot and mounts)")
    timings: list[tuple[str, float]] = []
    cache = os.path.join(os.path.expanduser("~"), ".cache", "cnibench", "mmdebstrap")
    os.makedirs(cache, exist_ok=True)
    day = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    tarball = os.path.join(cache, f"{BOOTSTRAP_CHECK_SUITE}-minbase-python3-iptables-{day}.tar")
    started = time.monotonic()
    if not os.path.exists(tarball):
        partial = f"{tarball}.partial"
        session.run(
            "mmdebstrap", "--quiet", "--variant=minbase", "--format=tar",
            "--include=python3,ca-certificates,iptables", BOOTSTRAP_CHECK_SUITE, partial,
            BOOTSTRAP_CHECK_MIRROR, external=True,
        )  # fmt: skip
        os.replace(partial, tarball)
        for old in os.listdir(cache):  # one tarball kept: today's
            if old.endswith(".tar") and os.path.join(cache, old) != tarball:
                os.unlink(os.path.join(cache, old))
        timings.append(("mmdebstrap (cold)", time.monotonic() - started))
    else:
        timings.append((f"mmdebstrap (cached: {os.path.basename(tarball)})", 0.0))
    root = tempfile.mkdtemp(prefix="cnibench-bootstrap-check-", dir="/var/tmp")
    log_path = os.path.join(session.create_tmp(), "bootstrap-check.log")
    try:
        started = time.monotonic()
        subprocess.run(["tar", "-xf", tarball, "-C", root], check=True)
        with open(os.path.join(root, "etc/apt/sources.list"), "a") as sources:
            sources.write(
                f"deb {BOOTSTRAP_CHECK_MIRROR} {BOOTSTRAP_CHECK_SUITE}-updates main\n"
                f"deb http://deb.debian.org/debian-security {BOOTSTRAP_CHECK_SUITE}-security"
                " main\n"
            )
        shutil.copy("/etc/resolv.conf", os.path.join(root, "etc/resolv.conf"))
        shutil.copy(
            "/etc/ssl/certs/ca-certificates.crt", os.path.join(root, "etc/ssl/certs/machine-ca.crt")
        )
        shutil.copytree(
            ".",
            os.path.join(root, "root/cnibench"),
            symlinks=True,
            ignore=_not_in_a_clone,
        )
        timings.append(("unpack the root and copy the repository", time.monotonic() - started))
        units_before = _enabled_units(root)
        _in_root(root, "update-alternatives", "--set", "iptables", BOOTSTRAP_CHECK_IPTABLES)
        iptables_before = _in_root(root, "update-alternatives", "--query", "iptables").stdout
        if _alternative_state(iptables_before) != f"manual {BOOTSTRAP_CHECK_IPTABLES}":
            session.error(f"the root's iptables alternative could not be set: {iptables_before}")
        command = _readme_command(0)
        session.log(f"running {' '.join(command)} in {root} (output: {log_path})")
        started = time.monotonic()
        with open(log_path, "w") as log:
            done = subprocess.run(
                ["unshare", "--mount", "--propagation", "private", "bash", "-euc",
                 BOOTSTRAP_CHECK_RUN, "bash", root, *command],
                stdout=log, stderr=subprocess.STDOUT, check=False,
            )  # fmt: skip
        timings.append((" ".join(command), time.monotonic() - started))
        with open(log_path, errors="replace") as log:
            output = log.read()
        print("\n".join(output.splitlines()[-60:]), flush=True)
        left = _mounts_under(root)
        new_units = sorted(_enabled_units(root) - units_before)
        iptables_after = _in_root(root, "update-alternatives", "--query", "iptables").stdout
        before_value = _alternative_state(iptables_before)
        after_value = _alternative_state(iptables_after)
        for step, seconds in timings:
            session.log(f"{seconds:7.1f} s  {step}")
        session.log(f"iptables alternative: before {before_value}, after {after_value}")
        problems = []
        if done.returncode != 0:
            problems.append(f"exit {done.returncode}")
        if "What each feature costs" not in output:
            problems.append("no matrix ('What each feature costs') in the output")
        if new_units:
            problems.append(f"units enabled by the install: {', '.join(new_units)}")
        if after_value != before_value:
            problems.append(f"the iptables alternative changed from {before_value}")
        if left:
            problems.append(f"mounts left behind: {', '.join(left)}")
        if problems:
            session.error(f"bootstrap-check failed: {'; '.join(problems)} (log: {log_path})")
    finally:
        if _mounts_under(root):  # never delete through a mount of /dev or /sys
            session.warn(f"{root} kept: mounts are still under it")
        else:
            shutil.rmtree(root, ignore_errors=True)


def _alternative_state(query: str) -> str | None:
    """``Status Value`` of an ``update-alternatives --query`` output (None: no such group)."""
    fields = dict(line.split(": ", 1) for line in query.splitlines() if ": " in line[:8])
    if "Value" not in fields:
        return None
    return f"{fields.get('Status', '?')} {fields['Value']}"
