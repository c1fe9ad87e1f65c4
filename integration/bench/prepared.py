#!/usr/bin/python3
"""pgbench -M prepared -S through pgsluice (transaction pooling, pool 2 and pool 20) vs direct,
in one run, then SHOW PREPARED: client Parses vs server Parses vs Binds (issue 5).

    integration/bench/prepared.py [--pgsluice PATH] [--clients 50] [--seconds 15] [--rounds 2]

A throwaway PostgreSQL 15 cluster (integration/harness.py, pgbench -i -s 1) on 127.0.0.1; the
targets are measured interleaved, round by round. Every process is stopped by its own PID.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import harness  # noqa: E402


def pgbench(port: int, clients: int, seconds: int) -> tuple[float, int, str]:
    cmd = ["pgbench", "-h", harness.HOST, "-p", str(port), "-U", "app", "-M", "prepared", "-S",
           "-c", str(clients), "-j", "2", "-T", str(seconds), "--no-vacuum", "app"]
    rc, out, err = harness.run(cmd, env=harness.clean_env(PGPASSWORD="app"),
                               timeout=seconds + 120)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out}\n{err}")
    tps = float(re.search(r"tps = ([\d.]+) \(without initial connection time\)", out).group(1))
    failed = int(re.search(r"number of failed transactions: (\d+)", out).group(1))
    return tps, failed, " ".join(cmd)


def show_prepared(pooler) -> dict[str, str]:
    rc, out, err = pooler.psql("SHOW PREPARED", db="pgsluice",
                               args=["-P", "tuples_only=off", "-P", "footer=off"])
    header, row = out.strip().splitlines()[:2]
    return dict(zip(header.split("|"), row.split("|")))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pgsluice", default=harness.pgsluice_bin())
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    harness.raise_nofile()
    pg = harness.PostgresCluster()
    poolers = {}
    try:
        pg.pgbench_init()
        for size in (2, 20):
            poolers[f"pgsluice pool {size}"] = harness.Pooler(
                pg, binary=args.pgsluice, default_pool_size=size, admin_users="app",
                max_client_conn=2000)
        targets = {"direct": pg.port}
        targets.update({name: p.port for name, p in poolers.items()})
        results: dict[str, list[float]] = {name: [] for name in targets}
        for r in range(args.rounds):
            for name, port in targets.items():
                tps, failed, cmd = pgbench(port, args.clients, args.seconds)
                if r == 0 and name == "direct":
                    print(f"command: {cmd}  (-p changes per target)")
                print(f"round {r + 1} {name:18} tps {tps:10.1f}  failed {failed}", flush=True)
                results[name].append(tps)
        print()
        for name, values in results.items():
            print(f"{name:18} tps " + " / ".join(f"{v:.0f}" for v in values))
        print()
        for name, p in poolers.items():
            s = show_prepared(p)
            servers = harness.run(["psql", "-X", "-At", "-h", harness.HOST, "-p", str(p.port),
                                   "-U", "app", "-d", "pgsluice", "-c", "SHOW SERVERS"],
                                  env=harness.clean_env(PGPASSWORD="app"))[1]
            n_servers = len([line for line in servers.splitlines() if line.strip()])
            print(f"{name}: servers {n_servers}, " + ", ".join(
                f"{k} {s[k]}" for k in ("client_parse_count", "server_parse_count", "bind_count",
                                        "eviction_count", "stale_plan_retry_count",
                                        "registry_statements")))
    finally:
        for p in poolers.values():
            p.stop(check=False)
        pg.stop()


if __name__ == "__main__":
    main()
