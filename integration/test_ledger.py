"""The commit ledger: N client threads run numbered two-row INSERT … COMMIT transactions through
pgsluice (transaction mode, a pool of 4) while a killer thread terminates a random backend every
second and the pooler's configuration is reloaded (admin console RELOAD, SIGHUP) every 2.5 s.
Afterwards the table must hold every transaction the client saw acknowledged, none that failed
before its COMMIT was sent, and no transaction half-applied (both rows or none). A transaction
whose COMMIT got no answer (the connection died during COMMIT) has an unknown outcome: it may be
either way, but still never half.

The second run kills with SIGKILL instead, every 4 s: the postmaster then ends every backend and
runs crash recovery, so every client loses its server at once. Its clients commit with
synchronous_commit = on (a startup option pgsluice carries to every server): the cluster runs
with it off, which lets a crash lose acknowledged commits by PostgreSQL's own design.

PGSLUICE_LEDGER_SECONDS (default 15) and PGSLUICE_LEDGER_CLIENTS (default 20) size the run."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import uuid

import psycopg

import pytest

import harness

SECONDS = float(os.environ.get("PGSLUICE_LEDGER_SECONDS", "15"))
CLIENTS = int(os.environ.get("PGSLUICE_LEDGER_CLIENTS", "20"))
POOL_SIZE = 4


class Outcomes:
    """What one client saw, per transaction number."""

    def __init__(self):
        self.acked: set[int] = set()      # COMMIT answered with success
        self.failed: set[int] = set()     # an error before COMMIT was sent: must be absent
        self.unknown: set[int] = set()    # the connection died during COMMIT
        self.attempted = 0
        self.errors: list[str] = []


def client_loop(pooler: harness.Pooler, table: str, client_id: int, stop: threading.Event,
                out: Outcomes, connect_args: dict) -> None:
    seq = 0
    conn = None
    while not stop.is_set():
        if conn is None:
            try:
                conn = pooler.connect(**connect_args)
            except psycopg.Error as e:
                out.errors.append(f"connect: {e}")
                time.sleep(0.05)
                continue
        seq += 1
        out.attempted = seq
        try:
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {table} VALUES (%s, %s, 1)", (client_id, seq))
                # Some time inside the transaction, so that kills land there too.
                if seq % 3 == 0:
                    cur.execute("SELECT pg_sleep(0.01)")
                cur.execute(f"INSERT INTO {table} VALUES (%s, %s, 2)", (client_id, seq))
        except psycopg.Error as e:
            out.failed.add(seq)
            out.errors.append(f"{seq}: {type(e).__name__}: {str(e).splitlines()[0]}")
            conn.close()
            conn = None
            continue
        try:
            conn.commit()
        except psycopg.Error as e:
            out.unknown.add(seq)
            out.errors.append(f"{seq} COMMIT: {type(e).__name__}: {str(e).splitlines()[0]}")
            conn.close()
            conn = None
            continue
        out.acked.add(seq)
    if conn is not None:
        conn.close()


@pytest.mark.parametrize("kill", ["terminate", "sigkill"])
def test_commit_ledger(pg, make_pooler, kill):
    if kill == "sigkill" and not harness.is_root():
        pytest.skip("needs to signal the postgres user's processes")
    table = f"ledger_{uuid.uuid4().hex[:8]}"
    pg.psql(f"CREATE TABLE {table} (client int, seq int, part int, "
            f"PRIMARY KEY (client, seq, part)); ALTER TABLE {table} OWNER TO app", db="app")
    # After a crash, logins fail until recovery ends: retry them soon.
    pooler = make_pooler(pool_mode="transaction", default_pool_size=POOL_SIZE,
                         admin_users="app", query_wait_timeout=60, server_login_retry=1)
    connect_args = {"options": "-c synchronous_commit=on"} if kill == "sigkill" else {}
    kill_every = 1 if kill == "terminate" else 4
    stop = threading.Event()
    outcomes = [Outcomes() for _ in range(CLIENTS)]
    threads = [threading.Thread(target=client_loop,
                                args=(pooler, table, i, stop, outcomes[i], connect_args))
               for i in range(CLIENTS)]
    rng = random.Random(20241130)  # fixed: a failing run can be compared with the next
    kills = 0
    reloads = {"ok": 0, "failed": 0, "sighup": 0}
    for t in threads:
        t.start()
    start = time.monotonic()
    next_reload = start + 2.5
    while time.monotonic() - start < SECONDS:
        time.sleep(kill_every)
        backends = [pid for pid, _, _ in pg.server_backends()]
        if backends:
            victim = rng.choice(sorted(backends))
            if kill == "terminate":
                pg.psql(f"SELECT pg_terminate_backend({victim})")
            else:
                os.kill(victim, signal.SIGKILL)
                time.sleep(0.5)
                pg.wait_ready()
            kills += 1
        if time.monotonic() >= next_reload:
            next_reload += 2.5
            # Alternately the admin console's RELOAD and SIGHUP (to pgsluice's own PID).
            if (reloads["ok"] + reloads["failed"] + reloads["sighup"]) % 2 == 0:
                rc, _, err = pooler.psql("RELOAD", db="pgsluice", timeout=30)
                reloads["ok" if rc == 0 else "failed"] += 1
            else:
                pooler.proc.send_signal(signal.SIGHUP)
                reloads["sighup"] += 1
    stop.set()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a client thread hung"
    assert pooler.alive()

    rows = pg.psql(f"SELECT client, seq, count(*) FROM {table} GROUP BY client, seq", db="app")
    present: dict[tuple[int, int], int] = {}
    for line in rows.splitlines():
        c, s, n = (int(x) for x in line.split("|"))
        present[(c, s)] = n

    lost, half, failed_but_present, phantom = [], [], [], []
    unknown_committed = unknown_absent = 0
    for (c, s), n in present.items():
        if n != 2:
            half.append((c, s, n))
        if s > outcomes[c].attempted:
            phantom.append((c, s))
    for c, out in enumerate(outcomes):
        for s in out.acked:
            if present.get((c, s)) != 2:
                lost.append((c, s))
        for s in out.failed:
            if (c, s) in present:
                failed_but_present.append((c, s))
        for s in out.unknown:
            if (c, s) in present:
                unknown_committed += 1
            else:
                unknown_absent += 1

    acked = sum(len(o.acked) for o in outcomes)
    failed = sum(len(o.failed) for o in outcomes)
    unknown = sum(len(o.unknown) for o in outcomes)
    attempted = sum(o.attempted for o in outcomes)
    summary = (f"ledger ({kill}): {CLIENTS} clients, {SECONDS:.0f} s, pool {POOL_SIZE}: "
               f"{attempted} transactions attempted, {acked} acknowledged, {failed} failed "
               f"before COMMIT, {unknown} with COMMIT outcome unknown ({unknown_committed} "
               f"committed, {unknown_absent} not); {kills} backends terminated, "
               f"RELOAD {reloads}; lost {len(lost)}, half-applied {len(half)}, failed but "
               f"present {len(failed_but_present)}, phantom {len(phantom)}")
    print(summary)
    sample_errors = [e for o in outcomes for e in o.errors][:10]
    assert not lost, (summary, lost[:20])
    assert not half, (summary, half[:20])
    assert not failed_but_present, (summary, failed_but_present[:20])
    assert not phantom, (summary, phantom[:20])
    # The run did what it is for: commits went through, and kills hit transactions.
    assert acked > (10 if kill == "terminate" else 2) * CLIENTS, summary
    # (Each round also waits for psql on a busy machine: fewer rounds than SECONDS / kill_every.)
    assert kills >= max(2, SECONDS / kill_every / 4), summary
    assert failed + unknown > 0, (summary, sample_errors)
    assert reloads["failed"] == 0, summary
    assert pooler.wait_for_log(r"reload", timeout=1), "no reload in pgsluice's log"
    pg.psql(f"DROP TABLE {table}", db="app")
