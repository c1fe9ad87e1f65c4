"""A soak: many pgbench clients (select-only) through pgsluice for a while, then a phase of
connection churn (a new connection per transaction), with pgsluice's RSS sampled every second.
No errors, memory flat after warm-up, and a clean exit (under the ASan build: no leak report).

Short form (CI, the default): 200 clients for 15 s, churn for 5 s. Long form (the issue's 1,000
clients for 10 minutes, by hand against the ASan build):
    PGSLUICE_SOAK_CLIENTS=1000 PGSLUICE_SOAK_SECONDS=600 \\
    PGSLUICE_BIN=build-asan/pooler/pgsluice python3 -m pytest -s integration/test_soak.py
"""

from __future__ import annotations

import os
import re
import threading
import time

import harness

CLIENTS = int(os.environ.get("PGSLUICE_SOAK_CLIENTS", "200"))
SECONDS = int(os.environ.get("PGSLUICE_SOAK_SECONDS", "15"))
CHURN_SECONDS = max(5, SECONDS // 3)


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def pgbench_figures(stdout: str) -> tuple[int, int]:
    """(processed transactions, failed transactions) from pgbench's report."""
    processed = re.search(r"number of transactions actually processed: (\d+)", stdout)
    failed = re.search(r"number of failed transactions: (\d+)", stdout)
    assert processed, stdout
    return int(processed.group(1)), int(failed.group(1)) if failed else 0


def test_soak(pgbench_data, make_pooler, monkeypatch):
    # Under ASan, freed memory waits in a quarantine (256 MB by default) that shows as RSS growth
    # for a while; a small one keeps the flatness check meaningful. (A normal build ignores it.)
    opts = os.environ.get("ASAN_OPTIONS", "")
    monkeypatch.setenv("ASAN_OPTIONS", (opts + ":" if opts else "") + "quarantine_size_mb=16")
    pooler = make_pooler(pool_mode="transaction", default_pool_size=10,
                         max_client_conn=CLIENTS + 200, query_wait_timeout=120)
    pid = pooler.proc.pid
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def sample():
        t0 = time.monotonic()
        while not stop.is_set():
            try:
                samples.append((time.monotonic() - t0, rss_kb(pid)))
            except (OSError, RuntimeError):
                return
            stop.wait(1)

    sampler = threading.Thread(target=sample)
    rss_start = rss_kb(pid)
    sampler.start()
    try:
        jobs = str(min(4, CLIENTS))
        rc, out, err = pooler.pgbench(["-n", "-S", "-c", str(CLIENTS), "-j", jobs,
                                       "-T", str(SECONDS)], timeout=SECONDS + 300)
        assert rc == 0, (out, err[-3000:])
        steady, steady_failed = pgbench_figures(out)
        rss_after_steady = rss_kb(pid)
        rc, out2, err2 = pooler.pgbench(["-n", "-S", "-C", "-c", "20", "-j", "2",
                                         "-T", str(CHURN_SECONDS)], timeout=CHURN_SECONDS + 300)
        assert rc == 0, (out2, err2[-3000:])
        churn, churn_failed = pgbench_figures(out2)
    finally:
        stop.set()
        sampler.join(10)
    rss_end = rss_kb(pid)
    peak = max(kb for _, kb in samples)
    # Warm: after the clients connected (a quarter into the steady phase).
    warm_samples = [kb for t, kb in samples if t >= SECONDS / 4]
    rss_warm = warm_samples[0] if warm_samples else rss_after_steady
    print(f"soak: {CLIENTS} clients {SECONDS} s: {steady} transactions, {steady_failed} failed; "
          f"churn 20 clients {CHURN_SECONDS} s (a connection per transaction): {churn} "
          f"transactions, {churn_failed} failed; pgsluice RSS start {rss_start // 1024} MB, "
          f"warm {rss_warm // 1024} MB, end {rss_end // 1024} MB, peak {peak // 1024} MB")
    assert steady_failed == 0 and churn_failed == 0
    assert steady > CLIENTS and churn > 20
    # Flat: no growth after warm-up beyond noise (allocator caches, the ASan quarantine).
    assert rss_end <= rss_warm * 1.5 + 32 * 1024, (rss_warm, rss_end)
    assert pooler.alive()
    # No errors beyond those injected (none here): no warning or error line in pgsluice's log.
    bad = [line for line in pooler.log().splitlines()
           if re.search(r"^\S+ \S+ \d+ (warning|error|critical) ", line)]
    assert not bad, bad[:20]
