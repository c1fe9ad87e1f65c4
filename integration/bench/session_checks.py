#!/usr/bin/python3
"""pgbench through pgsluice with the session-state checks off and on, in one run.

The configurations run interleaved (off, default, warn, warn+verify, off, …) against one
throwaway PostgreSQL 15 (harness.PostgresCluster, pgbench scale 1), each pooler in transaction
mode with default_pool_size 8; the order rotates from one repeat to the next, so that no
configuration always runs first. The medians and min-max of the repeats are printed as a Markdown
table, with the pooler's CPU time per transaction (user + system, from /proc/PID/stat), which a
busy machine disturbs much less than TPS. The checks must cost under 5% of throughput (issue 6);
the defaults (keep for settings) within 3% of off (issue 18).

Workloads: `select` is pgbench -S; `set` is a client that runs `SET work_mem` before the same
SELECT in every pgbench transaction (two pooled transactions: the SET's, which `keep` reads back,
and the SELECT's) — the cost of keep. `function-read` runs `SELECT bench_read(:aid)`, a PL/pgSQL
function that only reads pgbench_accounts (the cost of an opaque call the pooler has judged by
its body: function_verdicts.h), `function-set` `SELECT bench_set(:aid)`, which also runs
`set_config('work_mem', '3MB', false)` (the check and DISCARD ALL after every transaction);
`tpcb` pgbench's tpcb-like transaction (BEGIN, three UPDATEs, a SELECT, an INSERT, END).

    /usr/bin/python3 integration/bench/session_checks.py --pgsluice build-rel/pooler/pgsluice \
        [--repeats 3] [--duration 10] [--clients 8] [--protocol simple] \
        [--workload select|set|function-read|function-set|tpcb] \
        [--configs off,default,warn,warn+verify=sample/100] [--window] [--perf-stat] \
        [--perf-record DIR]

--window measures the steady state: from when all clients are logged in, for --duration seconds
(TPS and CPU per transaction by the pooler's SHOW TOTALS), without the logins,
which otherwise weigh in at 1,000 clients and vary with the machine's load.
--perf-stat counts the pooler's instructions, cycles and system calls (epoll_ctl and epoll_wait
apart) per transaction with `perf stat -p` over what is measured (the whole run, or the window):
instructions move far less than time on a machine shared with other work. --perf-record DIR writes DIR/<config>.data (`perf record -g`
of the pooler over the first repeat), for `perf diff` or `perf report`. On a machine without
hardware counters (a VM: perf stat says <not supported>), --callgrind DIR counts the instructions
under valgrind instead (implies --window; DIR/<config>/ gets its dumps, for callgrind_annotate):
the pooler runs many times slower there, so its TPS and CPU mean nothing, but the instructions
per transaction do not depend on the machine's load at all (server logins in the window are left
out: callgrind_instructions).

Use a Release binary: a Debug one measures the debug build.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import harness  # noqa: E402

CONFIGS = {
    "off": {"session_state_action": "off"},
    "default": {},
    "warn": {"session_state_action": "warn"},
    "warn+verify=sample/100": {"session_state_action": "warn", "session_state_verify": "sample",
                               "session_state_verify_sample": "100"},
}


FUNCTIONS = """
CREATE OR REPLACE FUNCTION bench_read(a int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN RETURN (SELECT abalance FROM pgbench_accounts WHERE aid = a); END $$;
CREATE OR REPLACE FUNCTION bench_set(a int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('work_mem', '3MB', false);
  RETURN (SELECT abalance FROM pgbench_accounts WHERE aid = a);
END $$;
"""

SCRIPTS = {
    "set": "SET work_mem = '64MB';\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n",
    "function-read": "SELECT bench_read(:aid);\n",
    "function-set": "SELECT bench_set(:aid);\n",
    # pgbench's built-in tpcb-like transaction, written out: this script's workloads are files
    # (the \set aid line is added to each; scale 1's 100,000 accounts).
    "tpcb": "\\set bid random(1, 1)\n\\set tid random(1, 10)\n\\set delta random(-5000, 5000)\n"
            "BEGIN;\n"
            "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\n"
            "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
            "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;\n"
            "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;\n"
            "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
            "VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);\n"
            "END;\n",
}


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# Hardware counters where there are (a VM without a PMU says <not supported>), and the system
# calls, which tracepoints count anywhere.
PERF_EVENTS = ["instructions", "cycles", "raw_syscalls:sys_enter", "syscalls:sys_enter_epoll_ctl",
               "syscalls:sys_enter_epoll_wait"]


def start_perf(pid: int, stat: bool, record_path: str | None) -> subprocess.Popen | None:
    if record_path is not None:
        cmd = ["perf", "record", "-q", "-g", "-o", record_path, "-p", str(pid)]
    elif stat:
        cmd = ["perf", "stat", "-x", ",", "-e", ",".join(PERF_EVENTS), "-p", str(pid)]
    else:
        return None
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stop_perf(perf: subprocess.Popen | None) -> dict[str, float]:
    """SIGINT ends perf's count (it prints it) or its recording; the counts by event name."""
    if perf is None:
        return {}
    perf.send_signal(signal.SIGINT)
    _, err = perf.communicate(timeout=120)
    counts = {}
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].isdigit():
            counts[fields[2]] = float(fields[0])
    return counts


def callgrind_wrapper(binary: str, directory: str) -> str:
    """A script that runs `binary` under callgrind, counting nothing until told to
    (callgrind_window_start); its dumps go to `directory`."""
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o755)
    wrapper = os.path.join(directory, "pgsluice")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec valgrind --tool=callgrind --instr-atstart=no "
                f"--callgrind-out-file={directory}/callgrind.out \\\n    {binary} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    return wrapper


def pgbench_args(args, script: str | None, duration: int) -> list[str]:
    workload = ["-S"] if script is None else ["-f", script]
    return ["-n", *workload, "-M", args.protocol, "-c", str(args.clients), "-j", "2",
            "-T", str(duration)]


def run_whole(pooler, args, script, record):
    """One pgbench run, measured whole (its connections included): TPS, CPU us and perf counts
    per transaction."""
    perf = start_perf(pooler.proc.pid, args.perf_stat, record)
    cpu_before = cpu_seconds(pooler.proc.pid)
    rc, out, err = pooler.pgbench(pgbench_args(args, script, args.duration),
                                  timeout=args.duration + 120)
    counts = stop_perf(perf)
    m = re.search(r"tps = ([0-9.]+) \((?:without initial connection time|excluding)", out)
    processed = re.search(r"number of transactions actually processed: (\d+)", out)
    if rc != 0 or m is None or processed is None or int(processed.group(1)) == 0:
        print(out, err, file=sys.stderr)
        return None
    txns = int(processed.group(1))
    cpu = (cpu_seconds(pooler.proc.pid) - cpu_before) * 1e6 / txns
    return float(m.group(1)), cpu, {k: v / txns for k, v in counts.items()}


def pooled_transactions(admin) -> tuple[int, int]:
    """SHOW TOTALS' total_xact_count, and the clients logged in (SHOW POOLS), over a console
    connection `admin`."""
    totals = dict(admin.execute("SHOW TOTALS").fetchall())
    cur = admin.execute("SHOW POOLS")
    cols = [d.name for d in cur.description]
    clients = 0
    for row in cur.fetchall():
        r = dict(zip(cols, row))
        if r["database"] == "app":
            clients += int(r["cl_active"]) + int(r["cl_waiting"])
    return int(totals["total_xact_count"]), clients


def callgrind(pid: int, *options: str) -> None:
    subprocess.run(["callgrind_control", *options, str(pid)], check=True,
                   stdout=subprocess.DEVNULL, timeout=120)


def callgrind_window_start(pid: int) -> None:
    callgrind(pid, "--zero")
    callgrind(pid, "--instr=on")


def callgrind_window_end(pid: int, directory: str) -> tuple[float, int]:
    """The instructions and transactions since callgrind_window_start (callgrind_instructions),
    from the dump it writes now."""
    callgrind(pid, "--instr=off")
    before = set(glob.glob(os.path.join(directory, "*")))
    callgrind(pid, "--dump")
    for _ in range(100):
        new = set(glob.glob(os.path.join(directory, "*"))) - before
        if new:
            time.sleep(0.5)  # let it be written whole
            return callgrind_instructions(new.pop())
        time.sleep(0.1)
    raise RuntimeError("callgrind wrote no dump")


def callgrind_instructions(dump: str) -> tuple[float, int]:
    """A dump's instructions, less the pool's server logins in it (a SCRAM login costs the
    pooler some 16 million instructions, PBKDF2, and how many servers connect in a window under
    valgrind varies from run to run far more than the transactions' own cost does); and the
    pooled transactions in it, as the calls of Pool::request_server (one per transaction a
    client begins; SHOW TOTALS around the window would count those run while callgrind_control
    and the console's own login take their time, uninstrumented)."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", dump],
                         capture_output=True, text=True, check=True).stdout
    total, login = 0.0, 0.0
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) .*PROGRAM TOTALS", line)
        if m:
            total = float(m.group(1).replace(",", ""))
        m = re.match(r"\s*([\d,]+) \(.*pgsluice::Server::process_login_input\(\)", line)
        if m:
            login = max(login, float(m.group(1).replace(",", "")))
    # Names are compressed: "(id) name" the first time, in an fn= or a cfn= line, "(id)" after.
    calls, target, pending = 0, None, False
    with open(dump) as f:
        for line in f:
            if line.startswith(("fn=(", "cfn=(")):
                ident, _, name = line.split("=", 1)[1].strip().partition(" ")
                if name.startswith("pgsluice::Pool::request_server("):
                    target = ident
                pending = line.startswith("cfn=") and ident == target
            elif pending and line.startswith("calls="):
                calls += int(line[6:].split()[0])
                pending = False
    return total - login, calls


def run_window(pooler, args, script, record):
    """The steady state only: once all of pgbench's clients are logged in (1,000 SCRAM logins
    take seconds, more on a busy machine), `duration` seconds measured by the pooler's own
    transaction count; then pgbench is stopped. A `set` transaction is two pooled ones."""
    cmd = ["pgbench", "-h", harness.HOST, "-p", str(pooler.port), "-U", "app",
           *pgbench_args(args, script, args.duration + 600), "app"]
    bench = subprocess.Popen(cmd, env=pooler.client_env("app"), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    # One console connection throughout: its login must not fall inside the window.
    admin = psycopg.connect(pooler.dsn(db="pgsluice"), autocommit=True)
    begun = 0
    try:
        deadline = time.monotonic() + 300
        while pooled_transactions(admin)[1] < args.clients:
            if bench.poll() is not None or time.monotonic() > deadline:
                print(bench.stderr.read() if bench.stderr else "", file=sys.stderr)
                return None
            time.sleep(0.2)
        time.sleep(1)
        perf = start_perf(pooler.proc.pid, args.perf_stat, record)
        if args.callgrind:
            callgrind_window_start(pooler.proc.pid)
        xact_before = pooled_transactions(admin)[0]
        cpu_before = cpu_seconds(pooler.proc.pid)
        start = time.monotonic()
        time.sleep(args.duration)
        xacts = pooled_transactions(admin)[0] - xact_before
        cpu_after = cpu_seconds(pooler.proc.pid)
        elapsed = time.monotonic() - start
        counts = stop_perf(perf)
        if args.callgrind:
            counts["instructions"], begun = callgrind_window_end(pooler.proc.pid,
                                                                 pooler.callgrind_dir)
    finally:
        admin.close()
        # SIGTERM: a shell that starts this in the background has pgbench ignore SIGINT.
        bench.send_signal(signal.SIGTERM)
        bench.communicate(timeout=60)
    per_pgbench = 2 if args.workload == "set" else 1
    txns = xacts / per_pgbench
    if txns <= 0:
        return None
    cpu = (cpu_after - cpu_before) * 1e6 / txns
    per_tx = {k: v / txns for k, v in counts.items()}
    if args.callgrind:
        # The transactions callgrind saw begin, not those the console counted around it.
        per_tx["instructions"] = counts["instructions"] * per_pgbench / max(begun, 1)
    return txns / elapsed, cpu, per_tx


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pgsluice", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--protocol", default="simple", choices=["simple", "extended", "prepared"])
    ap.add_argument("--workload", default="select", choices=["select", *SCRIPTS])
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--pool-size", type=int, default=8)
    ap.add_argument("--perf-stat", action="store_true")
    ap.add_argument("--perf-record", metavar="DIR")
    ap.add_argument("--window", action="store_true")
    ap.add_argument("--callgrind", metavar="DIR")
    args = ap.parse_args()
    configs = {name: CONFIGS[name] for name in args.configs.split(",")}
    script = None
    if args.workload in SCRIPTS:
        script = os.path.join(tempfile.mkdtemp(prefix="pgsluice-bench-"), "workload.sql")
        with open(script, "w") as f:
            f.write("\\set aid random(1, 100000)\n" + SCRIPTS[args.workload])
        os.chmod(os.path.dirname(script), 0o755)

    if args.callgrind:
        args.window = True
    pg = harness.PostgresCluster()
    poolers = {}
    try:
        pg.pgbench_init()
        if args.workload.startswith("function"):
            pg.psql(FUNCTIONS, db="app")
        for name, settings in configs.items():
            binary = os.path.abspath(args.pgsluice)
            if args.callgrind:
                binary = callgrind_wrapper(binary, os.path.join(os.path.abspath(args.callgrind),
                                                                name))
            poolers[name] = harness.Pooler(pg, binary=binary, default_pool_size=args.pool_size,
                                           log_connections=0, log_disconnections=0,
                                           admin_users="app", start=False, **settings)
            poolers[name].start(timeout=60)
            poolers[name].callgrind_dir = os.path.dirname(binary)
        tps: dict[str, list[float]] = {name: [] for name in configs}
        cpu: dict[str, list[float]] = {name: [] for name in configs}
        instructions: dict[str, list[float]] = {name: [] for name in configs}
        names = list(poolers)
        for r in range(args.repeats):
            for name in names[r % len(names):] + names[:r % len(names)]:
                record = None
                if args.perf_record and r == 0:
                    os.makedirs(args.perf_record, exist_ok=True)
                    record = os.path.join(args.perf_record, f"{name}.data")
                run = run_window if args.window else run_whole
                result = run(poolers[name], args, script, record)
                if result is None:
                    return 1
                t, c, counts = result
                tps[name].append(t)
                cpu[name].append(c)
                per_tx = ""
                if "instructions" in counts:
                    instructions[name].append(counts["instructions"])
                    per_tx += f", {counts['instructions']:.0f} instructions"
                if "raw_syscalls:sys_enter" in counts:
                    per_tx += (f", {counts['raw_syscalls:sys_enter']:.2f} syscalls (epoll_ctl "
                               f"{counts.get('syscalls:sys_enter_epoll_ctl', 0):.3f}, epoll_wait "
                               f"{counts.get('syscalls:sys_enter_epoll_wait', 0):.2f})")
                if per_tx:
                    per_tx += " per transaction"
                print(f"repeat {r + 1} {name}: {t:.0f} tps, "
                      f"{c:.1f} us pooler CPU per transaction{per_tx}", flush=True)
        base_name = next(iter(configs))
        base = statistics.median(tps[base_name])
        print()
        print(f"pgbench -n {args.workload} -M {args.protocol} -c {args.clients} -j 2 "
              f"-T {args.duration}, pool_size {args.pool_size}, {args.repeats} interleaved "
              f"repeats, pgsluice {args.pgsluice}")
        print()
        cpu_base = statistics.median(cpu[base_name])
        print(f"| checks | median TPS | min-max | vs {base_name} | pooler CPU us/txn (min-max) "
              f"| vs {base_name} |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, values in tps.items():
            med = statistics.median(values)
            c = statistics.median(cpu[name])
            print(f"| {name} | {med:.0f} | {min(values):.0f}-{max(values):.0f} | "
                  f"{(med / base - 1) * 100:+.1f}% | {c:.2f} ({min(cpu[name]):.2f}-"
                  f"{max(cpu[name]):.2f}) | {(c / cpu_base - 1) * 100:+.1f}% |")
        if instructions[base_name]:
            print()
            print(f"| checks | pooler instructions/txn (min-max) | vs {base_name} |")
            print("|---|---:|---:|")
            i_base = statistics.median(instructions[base_name])
            for name, values in instructions.items():
                i = statistics.median(values)
                print(f"| {name} | {i:.0f} ({min(values):.0f}-{max(values):.0f}) | "
                      f"{(i / i_base - 1) * 100:+.1f}% |")
        return 0
    finally:
        for p in poolers.values():
            p.stop(check=False)
        pg.stop()


if __name__ == "__main__":
    sys.exit(main())
