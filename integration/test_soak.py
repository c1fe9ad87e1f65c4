"""A soak: many pgbench clients (select-only) through pgsluice for a while, with a configuration
reload (SIGHUP) every few seconds, then a phase of connection churn (a new connection per
transaction); pgsluice's RSS is sampled every second. No errors (the reloads must not cause any),
memory flat after warm-up, and a clean exit (under the ASan build: no leak report).

Short form (CI, the default): 200 clients for 15 s, churn for 5 s. Long form (the issue's 1,000
clients for 10 minutes; by hand, against the ASan build; see docs/reliability.md):
    PGSLUICE_SOAK_CLIENTS=1000 PGSLUICE_SOAK_SECONDS=600 \\
    PGSLUICE_BIN=build-asan/pooler/pgsluice python3 -m pytest -s integration/test_soak.py

Flat means: RSS at the end (after the churn phase) <= 1.2 x RSS after warm-up (the first sample
a quarter into the steady phase, when every client is connected), plus 8 MB of slack for the
small numbers of a normal build. PGSLUICE_SOAK_RELOAD_EVERY (seconds, default 5; 0 = off) sets
the reload interval.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import harness

CLIENTS = int(os.environ.get("PGSLUICE_SOAK_CLIENTS", "200"))
SECONDS = int(os.environ.get("PGSLUICE_SOAK_SECONDS", "15"))
RELOAD_EVERY = float(os.environ.get("PGSLUICE_SOAK_RELOAD_EVERY", "5"))
CHURN_SECONDS = max(5, SECONDS // 3)
GROWTH_FACTOR = 1.2
SLACK_KB = 8 * 1024
QUARANTINE_MB = 16  # ASan's, for this test (its default is 256 MB)


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
    monkeypatch.setenv("ASAN_OPTIONS",
                       (opts + ":" if opts else "") + f"quarantine_size_mb={QUARANTINE_MB}")
    pooler = make_pooler(pool_mode="transaction", default_pool_size=10,
                         max_client_conn=CLIENTS + 200, query_wait_timeout=120)
    pid = pooler.proc.pid
    samples: list[tuple[float, int]] = []
    reloads = 0
    stop = threading.Event()
    steady_done = threading.Event()

    def sample():
        nonlocal reloads
        t0 = time.monotonic()
        next_reload = t0 + RELOAD_EVERY
        while not stop.is_set():
            now = time.monotonic()
            try:
                samples.append((now - t0, harness.rss_kb(pid)))
            except (OSError, RuntimeError):
                return
            if RELOAD_EVERY > 0 and now >= next_reload and not steady_done.is_set():
                os.kill(pid, signal.SIGHUP)
                reloads += 1
                next_reload = now + RELOAD_EVERY
            stop.wait(1)

    sampler = threading.Thread(target=sample)
    rss_start = harness.rss_kb(pid)
    sampler.start()
    t_start = time.monotonic()
    try:
        jobs = str(min(4, CLIENTS))
        rc, out, err = pooler.pgbench(["-n", "-S", "-c", str(CLIENTS), "-j", jobs,
                                       "-T", str(SECONDS)], timeout=SECONDS + 300)
        steady_done.set()
        assert rc == 0, (out, err[-3000:])
        steady, steady_failed = pgbench_figures(out)
        steady_end = time.monotonic() - t_start
        rc, out2, err2 = pooler.pgbench(["-n", "-S", "-C", "-c", "20", "-j", "2",
                                         "-T", str(CHURN_SECONDS)], timeout=CHURN_SECONDS + 300)
        assert rc == 0, (out2, err2[-3000:])
        churn, churn_failed = pgbench_figures(out2)
    finally:
        stop.set()
        sampler.join(10)
    rss_end = harness.rss_kb(pid)
    peak = max(kb for _, kb in samples)
    # Warm: every client connected (a quarter into the steady phase; the logins take a while).
    warm_samples = [kb for t, kb in samples if t >= SECONDS / 4]
    rss_warm = warm_samples[0] if warm_samples else samples[-1][1]
    # About ten points of the curve, for the record.
    step = max(1, len(samples) // 10)
    curve = " ".join(f"{t:.0f}s:{kb // 1024}" for t, kb in samples[::step])
    print(f"\nsoak: {CLIENTS} clients {SECONDS} s (steady phase ended at {steady_end:.0f} s, "
          f"{reloads} reloads): {steady} transactions, {steady_failed} failed; churn 20 clients "
          f"{CHURN_SECONDS} s (a connection per transaction): {churn} transactions, "
          f"{churn_failed} failed; pgsluice RSS start {rss_start // 1024} MB, warm "
          f"{rss_warm // 1024} MB, end {rss_end // 1024} MB, peak {peak // 1024} MB\n"
          f"RSS curve (MB): {curve}")
    assert steady_failed == 0 and churn_failed == 0
    assert steady > CLIENTS and churn > 20
    assert RELOAD_EVERY <= 0 or SECONDS < RELOAD_EVERY or reloads >= 1
    # Flat: no growth after warm-up beyond noise (allocator caches, the ASan quarantine). Under
    # ASan the quarantine fills after warm-up with what the churn phase's logins free: up to its
    # whole size is noise on top of the normal build's allowance (runs measured 90 -> 105-109 MB
    # before and after the same change).
    allowed = max(rss_warm * GROWTH_FACTOR, rss_warm + SLACK_KB)
    if harness.sanitized(pid):
        allowed += QUARANTINE_MB * 1024
    assert rss_end <= allowed, (rss_warm, rss_end, allowed)
    assert pooler.alive()
    # No errors beyond those injected (a reload injects none): no warning or error line.
    bad = [line for line in pooler.log().splitlines()
           if re.search(r"^\S+ \S+ \d+ (warning|error|critical) ", line)]
    assert not bad, bad[:20]
