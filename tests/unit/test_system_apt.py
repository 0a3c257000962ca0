"""The apt step (``cnibench.system.apt_install``) leaves services and iptables as it found them:
a policy-rc.d that refuses every start during the install (never one that was there), the units
the install enabled disabled again, the iptables alternatives set back, and what it installed
named. Run against a temporary root with stand-ins for apt-get, update-alternatives, systemctl
and dpkg-query on ``PATH`` that record their calls (the real ones would change this machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnibench import system

REAL_QUERY = """\
Name: iptables
Link: /usr/sbin/iptables
Slaves:
 iptables-restore /usr/sbin/iptables-restore
 iptables-save /usr/sbin/iptables-save
Status: auto
Best: /usr/sbin/iptables-nft
Value: /usr/sbin/iptables-nft

Alternative: /usr/sbin/iptables-legacy
Priority: 10
Slaves:
 iptables-restore /usr/sbin/iptables-legacy-restore
 iptables-save /usr/sbin/iptables-legacy-save

Alternative: /usr/sbin/iptables-nft
Priority: 20
Slaves:
 iptables-restore /usr/sbin/iptables-nft-restore
 iptables-save /usr/sbin/iptables-nft-save
"""
"""``update-alternatives --query iptables`` on Debian 12 with iptables installed (this machine,
2026-12-06)."""

RECORD = 'printf "%s\\n" "$(basename "$0") $*" >> "$LOG"\n'

FAKES = {
    # Installing: says whether policy-rc.d would let a service start, enables nginx (a link in
    # multi-user.target.wants), switches iptables to nft in auto mode when told to, and adds
    # the packages to dpkg's list.
    "apt-get": RECORD
    + """[ "$1" = install ] || exit 0
policy="$ROOT/usr/sbin/policy-rc.d"
if [ -x "$policy" ]; then "$policy" nginx start; echo "policy-rc.d $?" >> "$LOG"; fi
wants="$ROOT/etc/systemd/system/multi-user.target.wants"
mkdir -p "$wants" && ln -s /lib/systemd/system/nginx.service "$wants/nginx.service"
if [ -e "$STATE/switches" ]; then printf 'auto /usr/sbin/iptables-nft\\n' > "$STATE/iptables"; fi
shift 4; for p in "$@"; do echo "$p" >> "$STATE/dpkg"; done; echo libfoo >> "$STATE/dpkg"
""",
    "update-alternatives": RECORD
    + """case "$1" in
--query) [ -e "$STATE/$2" ] || exit 2
  read -r status value < "$STATE/$2"
  printf 'Name: %s\\nLink: /usr/sbin/%s\\n' "$2" "$2"
  printf 'Status: %s\\nBest: x\\nValue: %s\\n' "$status" "$value" ;;
--set) printf 'manual %s\\n' "$3" > "$STATE/$2" ;;
--auto) printf 'auto /usr/sbin/%s-nft\\n' "$2" > "$STATE/$2" ;;
esac
""",
    "systemctl": RECORD
    + """root="${1#--root=}"; shift 2
for unit in "$@"; do rm -f "$root"/etc/systemd/system/*.wants/"$unit"; done
""",
    "dpkg-query": RECORD + 'while read -r p; do echo "ii  $p"; done < "$STATE/dpkg"\n',
}

COREUTILS = ("mkdir", "ln", "rm", "printf", "basename", "cat")


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary root (one unit enabled already: ssh) and a ``PATH`` of stand-ins."""
    root, state, path = tmp_path / "root", tmp_path / "state", tmp_path / "bin"
    for directory in (root, state, path):
        directory.mkdir()
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True)
    (wants / "ssh.service").symlink_to("/lib/systemd/system/ssh.service")
    (state / "dpkg").write_text("python3\n")
    for name, body in FAKES.items():
        (path / name).write_text(f"#!/bin/sh\n{body}")
        (path / name).chmod(0o755)
    for tool in COREUTILS:
        real = next(Path(d) / tool for d in ("/usr/bin", "/bin") if (Path(d) / tool).exists())
        (path / tool).symlink_to(real)
    monkeypatch.setenv("PATH", str(path))
    monkeypatch.setenv("LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("STATE", str(state))
    monkeypatch.setenv("ROOT", str(root))
    return tmp_path


def _calls(host: Path) -> list[str]:
    return (host / "calls.log").read_text().splitlines()


def test_the_install_takes_no_recommends_and_no_service_may_start(host: Path) -> None:
    system.apt_install(["nginx-light"], root=host / "root", quiet=True)
    calls = _calls(host)
    assert "apt-get install -y -q --no-install-recommends nginx-light" in calls
    assert "policy-rc.d 101" in calls  # present during the install, refusing
    assert not (host / "root" / "usr/sbin/policy-rc.d").exists()  # and gone after


def test_an_existing_policy_rc_d_is_neither_replaced_nor_removed(host: Path) -> None:
    policy = host / "root" / "usr/sbin/policy-rc.d"
    policy.parent.mkdir(parents=True)
    policy.write_text("#!/bin/sh\nexit 0\n")
    policy.chmod(0o755)
    system.apt_install(["nginx-light"], root=host / "root", quiet=True)
    assert policy.read_text() == "#!/bin/sh\nexit 0\n"
    assert "policy-rc.d 0" in _calls(host)


def test_policy_rc_d_is_removed_when_apt_get_cannot_run(host: Path) -> None:
    (host / "bin" / "apt-get").unlink()
    with pytest.raises(FileNotFoundError):
        system.apt_install(["nginx-light"], root=host / "root", quiet=True)
    assert not (host / "root" / "usr/sbin/policy-rc.d").exists()


def test_units_the_install_enabled_are_disabled_again(host: Path) -> None:
    outcome = system.apt_install(["nginx-light"], root=host / "root", quiet=True)
    wants = host / "root" / "etc/systemd/system/multi-user.target.wants"
    assert outcome.disabled == ("nginx.service",)
    assert f"systemctl --root={host / 'root'} disable nginx.service" in _calls(host)
    assert sorted(link.name for link in wants.iterdir()) == ["ssh.service"]  # ssh kept


def test_without_systemctl_the_links_are_removed(host: Path) -> None:
    (host / "bin" / "systemctl").unlink()
    outcome = system.apt_install(["nginx-light"], root=host / "root", quiet=True)
    wants = host / "root" / "etc/systemd/system/multi-user.target.wants"
    assert outcome.disabled == ("nginx.service",)
    assert sorted(link.name for link in wants.iterdir()) == ["ssh.service"]


@pytest.mark.parametrize(
    ("before", "switches", "restored", "after"),
    [
        ("manual /usr/sbin/iptables-legacy", True, True, "manual /usr/sbin/iptables-legacy"),
        ("manual /usr/sbin/iptables-legacy", False, False, "manual /usr/sbin/iptables-legacy"),
        (None, True, False, "auto /usr/sbin/iptables-nft"),
    ],
    ids=["legacy-switched-back", "untouched-left-alone", "none-before-left-as-installed"],
)
def test_the_iptables_alternative_is_left_as_found(
    host: Path, before: str | None, switches: bool, restored: bool, after: str
) -> None:
    state = host / "state"
    if before:
        (state / "iptables").write_text(f"{before}\n")
    if switches:
        (state / "switches").touch()
    outcome = system.apt_install(["iptables"], root=host / "root", quiet=True)
    set_back = ("update-alternatives", "--set", "iptables", "/usr/sbin/iptables-legacy")
    assert outcome.restored == ((set_back,) if restored else ())
    assert (state / "iptables").read_text() == f"{after}\n"
    assert not (state / "ip6tables").exists()  # absent before, left absent


def test_it_says_what_it_installed(host: Path) -> None:
    outcome = system.apt_install(["nginx-light", "iperf3"], root=host / "root", quiet=True)
    assert outcome.installed == ("iperf3", "libfoo", "nginx-light")  # python3 was there
    described = system._describe(outcome)
    assert described.splitlines()[0] == "apt installed 3 packages: iperf3 libfoo nginx-light"
    assert "disabled again (enabled by the install): nginx.service" in described


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (REAL_QUERY, system.Alternative("auto", "/usr/sbin/iptables-nft")),
        (
            REAL_QUERY.replace("Status: auto", "Status: manual").replace(
                "Value: /usr/sbin/iptables-nft", "Value: /usr/sbin/iptables-legacy"
            ),
            system.Alternative("manual", "/usr/sbin/iptables-legacy"),
        ),
        ("Name: iptables\nLink: /usr/sbin/iptables\nStatus: auto\nValue: none\n", None),
    ],
    ids=["debian12-auto-nft", "manual-legacy", "no-value"],
)
def test_parse_alternative(query: str, expected: system.Alternative | None) -> None:
    assert system.parse_alternative(query) == expected
