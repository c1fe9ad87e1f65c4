#!/usr/bin/python3
"""pgbench -S through pgsluice with the session-state checks off and on, in one run.

The configurations run interleaved (off, warn, warn+verify, off, warn, …) against one
throwaway PostgreSQL 15 (harness.PostgresCluster, pgbench scale 1), each pooler in transaction
mode with default_pool_size 8; the order rotates from one repeat to the next, so that no
configuration always runs first. The medians and min-max of the repeats are printed as a Markdown
table, with the pooler's CPU time per transaction (user + system, from /proc/PID/stat), which a
busy machine disturbs much less than TPS. The checks must cost under 5% of throughput (issue 6).

    /usr/bin/python3 integration/bench/session_checks.py --pgsluice build-sql-rel/pooler/pgsluice \
        [--repeats 3] [--duration 10] [--clients 8] [--protocol simple]

Use a Release binary: a Debug one measures the debug build.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import harness  # noqa: E402

CONFIGS = {
    "off": {"session_state_action": "off"},
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
    args = ap.parse_args()

    pg = harness.PostgresCluster()
    poolers = {}
    try:
        pg.pgbench_init()
        for name, settings in CONFIGS.items():
            poolers[name] = harness.Pooler(pg, binary=os.path.abspath(args.pgsluice),
                                           default_pool_size=8, log_connections=0,
                                           log_disconnections=0, **settings)
        tps: dict[str, list[float]] = {name: [] for name in CONFIGS}
        cpu: dict[str, list[float]] = {name: [] for name in CONFIGS}
        names = list(poolers)
        for r in range(args.repeats):
            for name in names[r % len(names):] + names[:r % len(names)]:
                pooler = poolers[name]
                cpu_before = cpu_seconds(pooler.proc.pid)
                cmd = ["-n", "-S", "-M", args.protocol, "-c", str(args.clients), "-j", "2",
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
        base = statistics.median(tps["off"])
        print()
        print(f"pgbench -n -S -M {args.protocol} -c {args.clients} -j 2 -T {args.duration}, "
              f"{args.repeats} interleaved repeats, pgsluice {args.pgsluice}")
        print()
        cpu_base = statistics.median(cpu["off"])
        print("| checks | median TPS | min-max | vs off | pooler CPU us/txn (min-max) | vs off |")
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
