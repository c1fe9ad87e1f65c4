"""PostgreSQL 15's own regression suite (pg_regress, parallel_schedule: 217 tests) through
pgsluice. integration/regress/run runs it directly, then through pgsluice in transaction mode at
default_pool_size 10 and 4 and in session mode, each against a fresh cluster on loopback, and
exits 1 when a test that passes directly fails through pgsluice without a line in
integration/regress/expected_failures.txt, when a run stalls (it is then cut short with a
diagnosis), or when pgsluice does not exit cleanly (a crash, a sanitizer report).

The suite's files (Debian's postgresql-15 source at the installed server's version, fetched with
apt-get source) and regress.so, refint.so and autoinc.so are prepared once and cached
(integration/regress/prepare.py); where that is impossible (no network to Debian, no root for
apt-get) the test is skipped. About 4 minutes on a 2-core machine (each run 40-60 s).
PGSLUICE_REGRESS_CONFIGS (say `pool10`) runs fewer configurations. PGSLUICE_REGRESS_SAVE_BASELINE
(a file) keeps the direct run, and PGSLUICE_REGRESS_BASELINE takes it from such a file instead of
running it again when the file is of the same suite (integration/regress/run --baseline):
scripts/test's normal pass writes build/regress-direct.json and its sanitizer pass reads it, since
the direct run is PostgreSQL alone, the same for either build."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "regress", "run")
CONFIGS = os.environ.get("PGSLUICE_REGRESS_CONFIGS", "direct,pool10,pool4,session")
# Each configuration's pg_regress, bounded by the script (measured: 40-60 s here, ASan build
# too); a stall is no output at all for this long (the slowest single test takes about 10 s).
# With the preparation's bound, at most 300 + 4 * 300 + 60 s: inside CTest's 1800 s for this file.
PER_RUN_TIMEOUT = 240
STALL_TIMEOUT = 120
PREPARE_TIMEOUT = 300  # apt-get install, apt-get update and source: once per machine


def run_script(args: list[str], timeout: float) -> tuple[int, str]:
    """integration/regress/run with args: (exit status, output). On a timeout the script gets
    SIGTERM, on which it stops its pg_regress, pgsluice and clusters."""
    env = harness.clean_env()  # keeps PGSLUICE_BIN, drops the other PG* variables
    if os.environ.get("PGSLUICE_REGRESS_CACHE"):
        env["PGSLUICE_REGRESS_CACHE"] = os.environ["PGSLUICE_REGRESS_CACHE"]
    proc = subprocess.Popen(["/usr/bin/python3", RUN] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        pytest.fail(f"integration/regress/run {' '.join(args)} did not end within {timeout} s\n"
                    f"{out[-6000:]}")
    return proc.returncode, out


def test_regression_suite_through_pgsluice(tmp_path):
    rc, out = run_script(["--prepare"], PREPARE_TIMEOUT)
    if rc == 3:
        pytest.skip(out.strip().splitlines()[-1])
    assert rc == 0, out[-6000:]

    outdir = str(tmp_path / "regress")
    configs = CONFIGS.split(",")
    baseline = []
    for flag, var in (("--baseline", "PGSLUICE_REGRESS_BASELINE"),
                      ("--save-baseline", "PGSLUICE_REGRESS_SAVE_BASELINE")):
        if os.environ.get(var):
            baseline += [flag, os.environ[var]]
    rc, out = run_script(["--configs", CONFIGS, "--out", outdir,
                          "--timeout", str(PER_RUN_TIMEOUT),
                          "--stall-timeout", str(STALL_TIMEOUT)] + baseline,
                         len(configs) * (PER_RUN_TIMEOUT + 60) + 60)
    summary_path = os.path.join(outdir, "summary.txt")
    assert os.path.exists(summary_path), f"integration/regress/run exited {rc}\n{out[-6000:]}"
    with open(summary_path) as f:
        summary = f.read()
    with open(os.path.join(outdir, "results.json")) as f:
        results = json.load(f)
    print(summary)

    # The baseline must be sound, or the comparison says nothing.
    direct = results["runs"]["direct"]
    passed = sum(1 for s in direct["status"].values() if s == "ok")
    assert not direct.get("stalled") and passed >= 0.9 * len(direct["status"]), \
        f"the direct run itself failed ({passed} of {len(direct['status'])} passed)\n{summary}"
    assert rc == 0, f"{summary}\n(regression.diffs and logs of each run in {outdir})"
