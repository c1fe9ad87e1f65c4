#!/usr/bin/python3
"""A/B: two pgsluice binaries in one run, in front of one throwaway PostgreSQL.

For a change that must not cost anything (a refactoring): `pgbench -S` (and with
--tpcb-clients the tpcb-like script, on the harness's scale-1 tables) through each binary at
each client count, the binaries interleaved round by round, TPS and pooler CPU per transaction
(utime + stime of the pgsluice process over the run, from /proc) as medians with min-max.

    /usr/bin/python3 integration/bench/ab.py --a OLD_BINARY --b NEW_BINARY \
        [--clients 20,1000] [--tpcb-clients 200] [--repeats 3] [--duration 10]
        [--workers-a N] [--workers-b N]
        [--set-a KEY=VALUE] [--set-b KEY=VALUE]

The same binary twice with different `workers` (--workers-a 1 --workers-b 2) compares worker
counts in one run; --set-a/--set-b KEY=VALUE give either one any other setting.

Both poolers get the same settings (transaction mode, pool of 20, max_client_conn 2000, md5,
the harness's worker count); use Release builds. Prints a Markdown table.
"""
import argparse
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import harness  # noqa: E402
from measure import proc_cpu_seconds  # noqa: E402


def one_run(pooler: harness.Pooler, clients: int, duration: int,
            script: str = "-S") -> tuple[float, float]:
    before = proc_cpu_seconds(pooler.proc.pid)
    rc, out, err = pooler.pgbench(["-c", str(clients), "-j", "2", script, "-T", str(duration),
                                   "--no-vacuum"], timeout=duration + 120)
    used = proc_cpu_seconds(pooler.proc.pid) - before
    if rc != 0:
        raise SystemExit(f"pgbench failed: {out}\n{err[-2000:]}")
    m = re.search(r"tps = ([\d.]+) \(without initial", out)
    if m is None:
        raise SystemExit(f"no tps in pgbench output: {out}\n{err[-2000:]}")
    tps = float(m.group(1))
    txns = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
    return tps, used * 1e6 / max(txns, 1)


def fmt(values: list[float], digits: int = 0) -> str:
    return (f"{statistics.median(values):,.{digits}f} "
            f"({min(values):,.{digits}f}–{max(values):,.{digits}f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="the 'before' pgsluice binary")
    ap.add_argument("--b", required=True, help="the 'after' pgsluice binary")
    ap.add_argument("--clients", default="20,1000")
    ap.add_argument("--tpcb-clients", default="",
                    help="client counts to run pgbench's tpcb-like script at too (say 200)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--workers-a", type=int, help="workers for a (default: the harness's)")
    ap.add_argument("--workers-b", type=int, help="workers for b (default: the harness's)")
    ap.add_argument("--set-a", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting of a's pgsluice.ini (repeatable)")
    ap.add_argument("--set-b", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting of b's pgsluice.ini (repeatable)")
    args = ap.parse_args()
    harness.raise_nofile()
    # (label, clients, pgbench's script option)
    runs = [(f"-S {c}", int(c), "-S") for c in args.clients.split(",") if c]
    runs += [(f"tpcb {c}", int(c), "--builtin=tpcb-like") for c in args.tpcb_clients.split(",") if c]
    pg = harness.PostgresCluster(max_connections=1200)
    poolers = {}
    try:
        pg.pgbench_init()
        # md5, as integration/bench/run: 1,000 SCRAM logins cost the pooler seconds of CPU, which
        # would land in the per-transaction figure of the 1,000-client runs.
        settings = dict(pool_mode="transaction", default_pool_size=20, max_client_conn=2000,
                        auth_type="md5")
        for name, binary, workers, sets in (("a", args.a, args.workers_a, args.set_a),
                                            ("b", args.b, args.workers_b, args.set_b)):
            extra = {"workers": workers} if workers else {}
            extra.update(kv.split("=", 1) for kv in sets)
            poolers[name] = harness.Pooler(pg, binary=binary, **settings, **extra)
            one_run(poolers[name], 20, args.warmup)
        results = {(n, label): [] for n in poolers for label, _, _ in runs}
        for r in range(args.repeats):
            for label, c, script in runs:
                # Alternate which binary goes first, so neither always runs on a warmer machine.
                order = ("a", "b") if r % 2 == 0 else ("b", "a")
                for name in order:
                    results[(name, label)].append(
                        one_run(poolers[name], c, args.duration, script))
        print(f"pgbench, {args.repeats} interleaved repeats x {args.duration} s, "
              "median (min-max)\n")
        print("| run | TPS a | TPS b | b/a | CPU us/txn a | CPU us/txn b | b/a |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for c, _, _ in runs:
            ta = [t for t, _ in results[("a", c)]]
            tb = [t for t, _ in results[("b", c)]]
            ca = [u for _, u in results[("a", c)]]
            cb = [u for _, u in results[("b", c)]]
            print(f"| {c} | {fmt(ta)} | {fmt(tb)} | "
                  f"{statistics.median(tb) / statistics.median(ta):.3f} | {fmt(ca, 2)} | "
                  f"{fmt(cb, 2)} | {statistics.median(cb) / statistics.median(ca):.3f} |")
    finally:
        for p in poolers.values():
            p.stop(check=False)
        pg.stop()


if __name__ == "__main__":
    main()
