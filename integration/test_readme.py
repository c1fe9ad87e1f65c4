"""README.md's commands as a new user runs them (issue 22): the quick start, psql through it, the
admin console, --stop, and the Running block, each as written (bash from the repository root),
plus docs/admin.md's console examples against the quick start. Every line of a ```sh block in
those two files is either run here (RUN, its exact text) or matched by one of NOT_RUN's
prefixes, which say which test covers it; a line that is neither fails
test_every_command_line_is_run_or_covered, so README and this list cannot drift apart.

The quick start uses fixed ports (6432, 54329), build/ and .quickstart/ of this checkout;
.quickstart/ is removed afterwards when this test made it. Skipped in the sanitizer pass: the
quick start runs build/'s pgsluice, which the normal pass already ran here."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess

import pytest

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DOCS = ("README.md", "docs/admin.md")

QUICKSTART = ("scripts/quickstart   # install the build's packages, build, start PostgreSQL + "
              "pgsluice, print how to connect")
PSQL_APP = 'psql "host=127.0.0.1 port=6432 dbname=app user=app password=app"'
PSQL_POOLS = ('psql "host=127.0.0.1 port=6432 dbname=pgsluice user=admin password=admin" '
              '-c "SHOW POOLS"')
PSQL_HELP = ('psql "host=127.0.0.1 port=6432 dbname=pgbouncer user=admin password=admin" '
             '-c "SHOW HELP"')
STOP = "scripts/quickstart --stop   # stops pgsluice and the cluster"
VERSION = ("build/pooler/pgsluice --version            # --help lists the options: "
           "-v/--verbose, -q/--quiet, -d")
FOREGROUND = ("build/pooler/pgsluice conf/quickstart.ini  # in the foreground, from the "
              "repository root; Ctrl-C stops it")
RUN = {QUICKSTART, PSQL_APP, PSQL_POOLS, PSQL_HELP, STOP, VERSION, FOREGROUND}
NOT_RUN = {
    "scripts/test ": "the whole suite, this test among it: .ci/run runs it",
    "integration/workshop/run ": "test_workshop.py runs each experiment's --short form",
}


def command_lines(relpath: str) -> list[str]:
    lines, fence = [], None  # fence: the opening line of the block we are in
    with open(os.path.join(REPO, relpath)) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("```"):
                fence = line if fence is None else None
            elif fence == "```sh" and line.strip():
                lines.append(line)
    return lines


def test_every_command_line_is_run_or_covered():
    found = [line for doc in DOCS for line in command_lines(doc)]
    unknown = [line for line in found
               if line not in RUN and not any(line.startswith(p) for p in NOT_RUN)]
    assert unknown == [], "command lines neither run by this test nor in NOT_RUN: %r" % unknown
    assert RUN - set(found) == set(), "RUN lines no longer in README.md or docs/admin.md"


def bash(line: str, stdin: str = "", timeout: float = 120) -> str:
    p = subprocess.run(["bash", "-c", line], cwd=REPO, input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout,
                       env=harness.clean_env())
    assert p.returncode == 0, f"{line}\nexited {p.returncode}:\n{p.stdout[-6000:]}"
    return p.stdout


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def fresh_checkout():
    if os.environ.get("PGSLUICE_SANITIZE") == "ON":
        pytest.skip("sanitizer pass: the quick start runs build/'s pgsluice, not the sanitized "
                    "one; the normal pass runs this test")
    busy = [p for p in (6432, 54329) if port_in_use(p)]
    assert busy == [], f"ports {busy} in use (a quick start running? scripts/quickstart --stop)"
    if harness.is_root() and subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x",
                                             REPO]).returncode != 0:
        pytest.skip(f"the postgres user cannot reach {REPO}: scripts/quickstart refuses such a "
                    "checkout, and says so")
    state = os.path.join(REPO, ".quickstart")
    made_here = not os.path.exists(state)
    yield
    subprocess.run(["scripts/quickstart", "--stop"], cwd=REPO, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)
    if made_here:
        shutil.rmtree(state, ignore_errors=True)


def test_first_hour(fresh_checkout):
    # The quick start builds pgsluice when build/ is not up to date: minutes on a cold build.
    out = bash(QUICKSTART, timeout=1200)
    # It prints the commands README shows, and they work as written.
    assert f"  {PSQL_APP}\n" in out and f"  {PSQL_POOLS}\n" in out, out
    out = bash(PSQL_APP, stdin="SELECT current_user, inet_server_port();\n")
    assert " app          |            54329" in out, out
    out = bash(PSQL_POOLS)
    # PgBouncer's columns; the console's own databases are rows too (pgbouncer, and pgsluice while
    # this session is connected to it), which widens the first columns.
    header = [column.strip() for column in out.lstrip().splitlines()[0].split("|")]
    assert "| transaction |" in out and header[:2] == ["database", "user"], out
    out = bash(PSQL_HELP)
    assert "SHOW HELP|CONFIG|DATABASES|POOLS" in out, out
    out = bash(STOP, timeout=60)
    assert "stopping pgsluice" in out and "stopping PostgreSQL" in out, out
    assert not port_in_use(6432) and not port_in_use(54329)

    assert bash(VERSION).startswith("pgsluice ")
    # The foreground line, stopped as README says (Ctrl-C is SIGINT). Its console needs no
    # PostgreSQL: the quick start's cluster is stopped by now.
    proc = subprocess.Popen(["bash", "-c", "exec " + FOREGROUND], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=harness.clean_env())
    try:
        harness.wait_for_port(6432, proc, 10)
        assert "SHOW HELP|CONFIG" in bash(PSQL_HELP)
    finally:
        proc.send_signal(signal.SIGINT)
        log, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, log
