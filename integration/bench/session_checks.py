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
and the SELECT's) — the cost of keep.

    /usr/bin/python3 integration/bench/session_checks.py --pgsluice build-rel/pooler/pgsluice \
        [--repeats 3] [--duration 10] [--clients 8] [--protocol simple] [--workload select|set] \
        [--configs off,default,warn,warn+verify=sample/100]

Use a Release binary: a Debug one measures the debug build.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import harness  # noqa: E402

CONFIGS = {
    "off": {"session_state_action": "off"},
    "default": {},
    "warn": {"session_state_action": "warn"},
    "warn+verify=sample/100": {"session_state_action": "warn", "session_state_verify": "sample",
                               "session_state_verify_sample": "100"},
}


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pgsluice", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--protocol", default="simple", choices=["simple", "extended", "prepared"])
    ap.add_argument("--workload", default="select", choices=["select", "set"])
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--pool-size", type=int, default=8)
    args = ap.parse_args()
    configs = {name: CONFIGS[name] for name in args.configs.split(",")}
    script = None
    if args.workload == "set":
        script = os.path.join(tempfile.mkdtemp(prefix="pgsluice-bench-"), "set.sql")
        with open(script, "w") as f:
            f.write("\\set aid random(1, 100000)\n"
                    "SET work_mem = '64MB';\n"
                    "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n")
        os.chmod(os.path.dirname(script), 0o755)

    pg = harness.PostgresCluster()
    poolers = {}
    try:
        pg.pgbench_init()
        for name, settings in configs.items():
            poolers[name] = harness.Pooler(pg, binary=os.path.abspath(args.pgsluice),
                                           default_pool_size=args.pool_size, log_connections=0,
                                           log_disconnections=0, **settings)
        tps: dict[str, list[float]] = {name: [] for name in configs}
        cpu: dict[str, list[float]] = {name: [] for name in configs}
        names = list(poolers)
        for r in range(args.repeats):
            for name in names[r % len(names):] + names[:r % len(names)]:
                pooler = poolers[name]
                cpu_before = cpu_seconds(pooler.proc.pid)
                workload = ["-S"] if script is None else ["-f", script]
                cmd = ["-n", *workload, "-M", args.protocol, "-c", str(args.clients), "-j", "2",
                       "-T", str(args.duration)]
                rc, out, err = pooler.pgbench(cmd, timeout=args.duration + 120)
                if rc != 0:
                    print(out, err, file=sys.stderr)
                    return 1
                m = re.search(r"tps = ([0-9.]+) \((?:without initial connection time|excluding)",
                              out)
                if m is None:
                    print(out, file=sys.stderr)
                    return 1
                tps[name].append(float(m.group(1)))
                txns = int(re.search(r"number of transactions actually processed: (\d+)",
                                     out).group(1))
                cpu[name].append((cpu_seconds(pooler.proc.pid) - cpu_before) * 1e6 / txns)
                print(f"repeat {r + 1} {name}: {tps[name][-1]:.0f} tps, "
                      f"{cpu[name][-1]:.1f} us pooler CPU per transaction", flush=True)
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
        return 0
    finally:
        for p in poolers.values():
            p.stop(check=False)
        pg.stop()


if __name__ == "__main__":
    sys.exit(main())
