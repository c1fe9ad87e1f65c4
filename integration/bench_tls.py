"""TLS versus plaintext through pgsluice, in one run: pgbench -S (select-only), N clients for T
seconds each, against one PostgreSQL (ssl = on) with two poolers in turn — plaintext on both sides,
then TLS on both sides (client_tls_sslmode = require, server_tls_sslmode = require). Reports TPS
and the pooler's CPU per transaction: utime + stime from /proc/PID/stat over the pgbench run,
divided by the transactions pgbench completed.

    PGSLUICE_BIN=build-tls-rel/pooler/pgsluice python3 integration/bench_tls.py \
        [clients=20] [seconds=10] [rounds=1]
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the ")" of comm: field 3 is index 0, so utime (14) and stime (15) are 11 and 12.
    return (int(fields[11]) + int(fields[12])) / TICKS


def run_one(pg, name: str, clients: int, seconds: int, settings: dict, sslmode: str) -> dict:
    p = harness.Pooler(pg, pool_mode="transaction", default_pool_size="16",
                       log_connections="0", log_disconnections="0", **settings)
    try:
        env = p.client_env("app")
        env["PGSSLMODE"] = sslmode
        # Warm-up: the pool's servers log in, PostgreSQL's caches fill.
        harness.run(["pgbench", "-h", harness.HOST, "-p", str(p.port), "-U", "app", "-S",
                     "-c", str(clients), "-j", "4", "-T", "2", "app"], env=env, timeout=120,
                    check=True)
        before = cpu_seconds(p.proc.pid)
        rc, out, err = harness.run(["pgbench", "-h", harness.HOST, "-p", str(p.port), "-U",
                                    "app", "-S", "-c", str(clients), "-j", "4",
                                    "-T", str(seconds), "app"],
                                   env=env, timeout=seconds + 120, check=True)
        cpu = cpu_seconds(p.proc.pid) - before
        tx = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
        failed = re.search(r"number of failed transactions: (\d+)", out)
        tps = float(re.search(r"tps = ([\d.]+) \(without initial connection time\)",
                              out).group(1))
        return {"name": name, "tps": tps, "tx": tx, "cpu_s": cpu,
                "us_per_tx": cpu / tx * 1e6, "failed": int(failed.group(1)) if failed else 0}
    finally:
        p.stop()


def main() -> None:
    clients = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1  # alternating, to see the noise
    pg = harness.PostgresCluster(max_connections=200, ssl=True)
    try:
        pg.pgbench_init()
        t = pg.tls
        results = []
        for _ in range(rounds):
            results.append(run_one(
                pg, "plaintext", clients, seconds,
                {"client_tls_sslmode": "disable", "server_tls_sslmode": "disable"}, "disable"))
            results.append(run_one(
                pg, "tls", clients, seconds,
                {"client_tls_sslmode": "require", "client_tls_key_file": t.server_key,
                 "client_tls_cert_file": t.server_cert, "server_tls_sslmode": "require"},
                "require"))
    finally:
        pg.stop()
    print(f"pgbench -S -c {clients} -j 4 -T {seconds}, transaction pooling, pool 16")
    print(f"{'':10} {'TPS':>10} {'tx':>9} {'CPU s':>7} {'µs/tx':>7} {'failed':>6}")
    for r in results:
        print(f"{r['name']:10} {r['tps']:10.0f} {r['tx']:9d} {r['cpu_s']:7.2f} "
              f"{r['us_per_tx']:7.2f} {r['failed']:6d}")


if __name__ == "__main__":
    main()
