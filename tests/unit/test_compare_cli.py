"""``cnibench compare`` as a person types it: exit 0/1/2/3, one line per regression or error.

One session a side cannot bound false alarms, so these give a session SD (``--session-sd``)
where they test a decided answer (tests/unit/test_gate_decides.py covers the rest)."""

from __future__ import annotations

import pytest
from compare_support import Condition, run_compare, write_result_set

NOISE = (1.0, 1.01, 0.99)


def _set(tmp_path, name, conditions):
    return write_result_set(tmp_path / name, conditions, session_id=f"20261122T100000Z-{name}")


def _throughput(scale, **kwargs):
    return Condition({"throughput": [scale * 1e9 * v for v in NOISE]}, **kwargs)


def test_regression_exits_1_with_one_line_naming_metric_and_condition(tmp_path):
    base = _set(tmp_path, "base", [_throughput(10.0)])
    cand = _set(tmp_path, "cand", [_throughput(5.0)])
    markdown = tmp_path / "comment.md"
    done = run_compare(
        base, cand, "--threshold", "5%", "--session-sd", "2%", "--markdown", markdown
    )
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "cnibench: REGRESSION throughput of baseline/routed/same-node-idle-iperf3: ratio 0.500"
    )
    assert done.stdout.splitlines()[0].startswith("REGRESSED: 1 regression beyond 5%")
    assert "| **REGRESSION** | throughput |" in markdown.read_text()


def test_within_threshold_exits_0_and_says_so_first(tmp_path):
    base = _set(tmp_path, "base", [_throughput(10.0)])
    done = run_compare(base, base, "--session-sd", "1%")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines()[0].startswith("WITHIN THRESHOLD: all 1 within 5%")


def test_a_loss_inside_a_wider_threshold_passes(tmp_path):
    base = _set(tmp_path, "base", [_throughput(10.0)])
    cand = _set(tmp_path, "cand", [_throughput(9.0)])
    assert run_compare(base, cand, "--threshold", "0.05", "--session-sd", "1%").returncode == 1
    assert run_compare(base, cand, "--threshold", "50%", "--session-sd", "1%").returncode == 0


BAD_INPUT = [
    (["{tmp}/missing", "{tmp}/base"], "baseline results directory {tmp}/missing does not exist"),
    (["{tmp}/base", "{tmp}/file"], "candidate results path {tmp}/file is not a directory"),
    (["{tmp}/base", "{tmp}/empty"], "candidate results in {tmp}/empty hold no run records"),
    (["{tmp}/base", "{tmp}/corrupt"], "candidate results in {tmp}/corrupt cannot be read"),
    (["{tmp}/base", "{tmp}/other"], "no condition is in both result sets"),
    (["{tmp}/base", "{tmp}/unverified"], "the candidate has no successful verified run"),
    # "--threshold -5%" would read -5% as an option (argparse): one line too, but a vaguer one.
    (
        ["{tmp}/base", "{tmp}/base", "--threshold=-5%"],
        "invalid threshold '-5%': it must not be negative",
    ),
    (["{tmp}/base", "{tmp}/base", "--threshold", "150%"], "must be at most 100%"),
    (["{tmp}/base", "{tmp}/base", "--threshold", "5"], "write 5% for per cent"),
    (["{tmp}/base", "{tmp}/base", "--threshold", "lots"], "invalid threshold 'lots'"),
    (["{tmp}/base", "{tmp}/base", "--session-sd", "3"], "invalid session SD '3'"),
    (["{tmp}/base", "{tmp}/base", "--session-sd=-1%"], "it must not be negative"),
    (
        ["{tmp}/base", "{tmp}/base", "--junit", "{tmp}/nodir/c.xml"],
        "directory {tmp}/nodir missing",
    ),
    (
        ["{tmp}/base", "{tmp}/base", "--markdown", "{tmp}/nodir/c.md"],
        "directory {tmp}/nodir missing",
    ),
    (["{tmp}/base"], "the following arguments are required: CANDIDATE_DIR"),
]


@pytest.mark.parametrize(
    ("argv", "message"),
    BAD_INPUT,
    ids=[" ".join(argv).replace("{tmp}/", "") for argv, _ in BAD_INPUT],
)
def test_bad_input_exits_2_with_one_line(tmp_path, argv, message):
    _set(tmp_path, "base", [_throughput(10.0)])
    _set(tmp_path, "other", [_throughput(10.0, condition="cross-node-idle-iperf3")])
    _set(tmp_path, "unverified", [_throughput(10.0, verified=False)])
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("not results")
    runs = tmp_path / "corrupt" / "20261122T100000Z-broken" / "runs"
    runs.mkdir(parents=True)
    (runs / "r0.json").write_text('{"schema": "cnibench.run", "records": [')

    done = run_compare(*[arg.format(tmp=tmp_path) for arg in argv])
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("cnibench: error: ")
    assert message.format(tmp=tmp_path) in lines[0]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "nodir").exists()


def test_mode_and_margin_on_the_command_line(tmp_path):
    base = _set(tmp_path, "base", [_throughput(10.0)])
    cand = _set(tmp_path, "cand", [_throughput(9.9)])
    # 1 % worse with three runs: not shown within 0.5 % (non-inferiority fails), and the
    # regression mode sees no loss beyond 5 %.
    strict = run_compare(base, cand, "--mode", "non-inferiority", "--threshold", "0.5%")
    assert strict.returncode == 1, strict.stderr
    assert strict.stderr.startswith("cnibench: NOT SHOWN WITHIN THRESHOLD throughput")
    same = run_compare(base, cand, "--margin", "50%", "--session-sd", "1%")
    assert same.returncode == 0, same.stderr
    assert "same within ±50%: 1 of 1 metric comparisons" in same.stdout
    bad = run_compare(base, cand, "--margin", "0%")
    assert bad.returncode == 2
    (line,) = bad.stderr.strip().splitlines()
    assert "invalid margin '0%'" in line
