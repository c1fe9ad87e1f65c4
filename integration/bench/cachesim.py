#!/usr/bin/python3
"""Instructions and simulated cache misses per transaction: poolers under callgrind.

Each pooler (PgBouncer 1.25.2 when harness.PGBOUNCER_ANCHOR is there, then each pgsluice binary
given) runs under `valgrind --tool=callgrind --cache-sim=yes` in front of one throwaway
PostgreSQL (transaction mode, pool 20, md5, pgsluice at `workers = 1`). pgbench warms it up,
the counters are zeroed (`callgrind_control -z`), a measured pgbench runs, the counters are
dumped (`callgrind_control -d`), and the dump's totals are divided by the transactions:

    /usr/bin/python3 integration/bench/cachesim.py BINARY [BINARY ...] \
        [--clients 20] [--transactions 500] [--tpcb] [--connect] [--keep DIR]

The simulated first-level caches are the CPU's (32 KiB, 8-way here). The counts do not move
with the machine's load, which makes them the A/B measure for a change of a few tenths of a
microsecond (docs/profile.md 0i); the client logins of the measured run are in them. --connect
measures a new connection per transaction (pgbench -C: a login, md5, one transaction, the
close), the login path's cost. --keep leaves the dumps in DIR for `callgrind_annotate`.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import harness  # noqa: E402

SHOWN = ("Ir", "D1mr", "D1mw", "I1mr")
POOL_SIZE = 20


def control(pooler: harness.Pooler, flag: str) -> None:
    # As the pooler's user and with its environment: vgdb finds the process by both.
    kwargs = {"user": "postgres"} if pooler.pgbouncer and harness.is_root() else {}
    subprocess.run(["callgrind_control", flag, str(pooler.proc.pid)], check=True,
                   stdout=subprocess.DEVNULL, env=harness.clean_env(), timeout=120, **kwargs)


def server_backends(pg) -> int:
    return int(pg.psql("SELECT count(*) FROM pg_stat_activity WHERE datname = 'app' AND "
                       "backend_type = 'client backend'").strip())


def totals(dump: str) -> dict[str, int]:
    events, summary = [], []
    with open(dump) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("summary:"):
                summary = [int(x) for x in line.split()[1:]]
    return dict(zip(events, summary))


def measure(pg, binary: str, out: str, args) -> dict[str, float]:
    name = os.path.basename(binary)
    prefix = os.path.join(out, f"{name}.")
    settings = dict(pool_mode="transaction", default_pool_size=POOL_SIZE, max_client_conn=2000,
                    auth_type="md5")
    if not harness.is_pgbouncer(binary):
        settings["workers"] = 1  # one event loop: the work per transaction, not wake-ups
    pooler = harness.Pooler(pg, binary=binary, start=False, **settings,
                            wrapper=["valgrind", "--tool=callgrind", "--cache-sim=yes",
                                     f"--callgrind-out-file={prefix}%p"])
    try:
        pooler.start(timeout=120)
        workload = [] if args.tpcb else ["-S"]
        base = ["-n", *workload, "-c", str(args.clients), "-j", "2", "--no-vacuum"]
        measured = base + (["-C"] if args.connect else [])
        # Warm until the pool is full: a server login in the measured run (SCRAM towards
        # PostgreSQL: millions of instructions) would outweigh the transactions' own work.
        for _ in range(10):
            rc, outp, err = pooler.pgbench(base + ["-t", "100"], timeout=600)
            if rc != 0:
                raise SystemExit(f"warm-up pgbench failed through {name}: {outp}\n{err[-2000:]}")
            if server_backends(pg) >= POOL_SIZE:
                break
        else:
            raise SystemExit(f"{name} did not open {POOL_SIZE} servers while warming up")
        control(pooler, "-z")
        rc, outp, err = pooler.pgbench(measured + ["-t", str(args.transactions)], timeout=1800)
        if rc != 0:
            raise SystemExit(f"pgbench failed through {name}: {outp}\n{err[-2000:]}")
        control(pooler, "-d")
        dumps = sorted(glob.glob(f"{prefix}{pooler.proc.pid}.*"), key=os.path.getmtime)
        if not dumps:
            raise SystemExit(f"no callgrind dump from {name} in {out}")
        counts = totals(dumps[-1])
    finally:
        pooler.stop(check=False)
    txns = args.clients * args.transactions
    return {e: counts.get(e, 0) / txns for e in SHOWN}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binaries", nargs="+", help="pgsluice binaries (Release builds)")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--transactions", type=int, default=500, help="per client")
    ap.add_argument("--tpcb", action="store_true", help="tpcb-like instead of select-only")
    ap.add_argument("--connect", action="store_true",
                    help="a new connection per transaction (pgbench -C)")
    ap.add_argument("--keep", help="a directory for the callgrind dumps (kept)")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    harness.raise_nofile()
    out = args.keep or tempfile.mkdtemp(prefix="pgsluice-cachesim-")
    os.makedirs(out, exist_ok=True)
    os.chmod(out, 0o777)  # PgBouncer runs as postgres and writes its dump here
    anchor = harness.pgbouncer_anchor()
    if anchor is None:
        print(f"no PgBouncer 1.25.2 at {harness.PGBOUNCER_ANCHOR}: pgsluice's rows only",
              file=sys.stderr)
    binaries = ([anchor] if anchor else []) + args.binaries
    pg = harness.PostgresCluster(max_connections=200)
    rows = []
    try:
        pg.pgbench_init()
        for binary in binaries:
            rows.append((binary, measure(pg, binary, out, args)))
    finally:
        pg.stop()
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    workload = ("tpcb-like" if args.tpcb else "select-only") + \
        (", a new connection per transaction (-C)" if args.connect else "")
    print(f"{workload}, {args.clients} clients x {args.transactions} transactions, per "
          "transaction (callgrind; L1 = simulated first-level cache)\n")
    print("| pooler | instructions | L1 data read misses | L1 data write misses | "
          "L1 instruction misses |")
    print("|---|---:|---:|---:|---:|")
    for binary, r in rows:
        print(f"| {binary} | {r['Ir']:,.0f} | {r['D1mr']:.1f} | {r['D1mw']:.1f} | "
              f"{r['I1mr']:.1f} |")


if __name__ == "__main__":
    main()
