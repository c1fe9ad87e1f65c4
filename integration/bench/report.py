"""Markdown table and SVG chart for integration/bench/run's results.json.

Also usable on its own to re-render a saved run:
    /usr/bin/python3 integration/bench/report.py integration/bench/out/results.json
which rewrites results.md and results.svg next to the JSON file.
"""

from __future__ import annotations

import functools
import html
import json
import math
import os
import statistics
import sys

TARGETS = ["direct", "pgbouncer", "pgsluice"]
POOLERS = ["pgbouncer", "pgsluice"]
LABEL = {"direct": "direct", "pgbouncer": "PgBouncer", "pgsluice": "pgsluice"}
COLOR = {"direct": "#7f7f7f", "pgbouncer": "#1f77b4", "pgsluice": "#d62728"}
TITLE = {
    "select_only_20": "select-only (-S), 20 clients",
    "select_only_200": "select-only (-S), 200 clients",
    "select_only_1000": "select-only (-S), 1,000 clients",
    "tpcb_200": "tpcb-like, 200 clients",
    "prepared_select_50": "-M prepared -S, 50 clients",
    "tls_select_200": "select-only (-S), 200 clients, TLS (sslmode=require)",
    "connect_select_50": "-C -S (a connection per transaction), 50 clients",
    "tls_connect_select_50": "-C -S (a connection per transaction), 50 clients, TLS",
    "rate_select_20": "-S at a fixed rate, 20 clients",
    "rate_select_1000_25": "-S at a fixed rate, 1,000 clients, 25 % of direct",
    "rate_select_1000_75": "-S at a fixed rate, 1,000 clients, 75 % of direct",
}
SHORT = {
    "select_only_20": "-S 20", "select_only_200": "-S 200", "select_only_1000": "-S 1000",
    "tpcb_200": "tpcb 200", "prepared_select_50": "prep. 50", "tls_select_200": "TLS 200",
    "connect_select_50": "-C 50", "tls_connect_select_50": "TLS -C 50",
    "rate_select_20": "rate 20", "rate_select_1000_25": "rate 1000 25%",
    "rate_select_1000_75": "rate 1000 75%",
}


# --------------------------------------------------------------------------------------------
# statistics


def ok(runs: list[dict]) -> list[dict]:
    return [r for r in runs if r.get("status") == "ok"]


def stat(values) -> tuple[float, float, float] | None:
    v = [x for x in values if x is not None]
    if not v:
        return None
    return statistics.median(v), min(v), max(v)


def field(runs: list[dict], key: str):
    return stat(r.get(key) for r in ok(runs))


def fmt(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "—"
    if digits == 0:
        return f"{x:,.0f}".replace(",", " ")
    return f"{x:.{digits}f}"


def fmt_range(s, digits: int = 0) -> str:
    if s is None:
        return "—"
    med, lo, hi = s
    if lo == hi:
        return fmt(med, digits)
    return f"{fmt(med, digits)} ({fmt(lo, digits)}–{fmt(hi, digits)})"


def ratio(a, b) -> str:
    if a is None or b is None or b[0] in (0, None):
        return "—"
    return f"{a[0] / b[0]:.2f}"


def failure_text(runs: list[dict]) -> str | None:
    bad = [r for r in runs if r.get("status") != "ok"]
    if not bad:
        return None
    errs: dict[str, int] = {}
    for r in bad:
        for k, v in r.get("errors", {}).items():
            errs[k] = errs.get(k, 0) + v
    top = sorted(errs.items(), key=lambda kv: -kv[1])[:2]
    what = "; ".join(f"{k} (×{v})" for k, v in top) or f"exit status {bad[0].get('rc')}"
    return f"FAILED in {len(bad)}/{len(runs)} runs: {what}"


def kb(v) -> str:
    return "—" if v is None else f"{v / 1024:.1f} MB"


def connect_cell(r: dict) -> str:
    if r.get("connection_avg_ms") is not None:  # -C: the average per connection
        return f"{r['connection_avg_ms']:.2f} each"
    return fmt(r.get("connect_ms"))


# --------------------------------------------------------------------------------------------
# Markdown


def markdown(res: dict) -> str:
    s = res.get("settings", {})
    m = res.get("machine", {})
    v = res.get("versions", {})
    out = []
    w = out.append
    w("# pgsluice benchmark: direct PostgreSQL vs PgBouncer vs pgsluice\n")
    if res.get("partial") or res.get("interrupted"):
        w("**Incomplete run** (interrupted or failed): only the scenarios below were measured.\n")
    w(f"- command: `{res.get('command')}` — started {res.get('started')}, "
      f"took {res.get('elapsed_s', '?')} s")
    w(f"- machine: {m.get('cpus')} CPUs ({m.get('cpu_model')}), {m.get('mem_gb')} GB, "
      f"Linux {m.get('kernel')}; shared with other work while this ran (see machine busy % "
      "per run below)")
    w(f"- {v.get('postgresql', '').split(' on ')[0]}; {v.get('pgbouncer')}"
      + (f" ({res['pgbouncer_source']})" if res.get("pgbouncer_source") else "")
      + f"; {v.get('pgbench')}; "
      f"{v.get('pgsluice')} ({res.get('pgsluice_build')}, git {res.get('git')}"
      + (f", workers = {s['pgsluice_workers']}" if s.get("pgsluice_workers") else "") + ")")
    w(f"- pgbench -i -s {s.get('scale')} (160 MB, fits in shared_buffers = 256MB, prewarmed); "
      f"pools: transaction mode, default_pool_size {s.get('pool_size')}, max_client_conn "
      f"{s.get('max_client_conn')}, auth_type md5, same userlist; all on 127.0.0.1 TCP")
    w(f"- each run: `pgbench -n -j 2 -T {s.get('duration_s')}`; {s.get('repeats')} repeat(s) per "
      f"target, targets interleaved in rounds (round r starts at target r: D,B,S / B,S,D / "
      f"S,D,B); a {s.get('warmup_s')} s warm-up per target before the first measured run, "
      "discarded")
    tls = res.get("tls")
    if tls:
        neg = tls.get("negotiated", {})
        w(f"- TLS scenarios: pgbench with `sslmode=require`; PostgreSQL `ssl = on` for direct; "
          "a second instance of each pooler with `client_tls_sslmode = require` (otherwise the "
          f"same config), certificate {tls.get('certificate')}; negotiated: "
          + "; ".join(f"{LABEL.get(t, t)} `{v}`" for t, v in neg.items())
          + (" (openssl s_client: " + "; ".join(f"{LABEL.get(t, t)} {v}" for t, v in
                                                 tls["handshake"].items()) + ")"
             if tls.get("handshake") else "")
          + ". Plain scenarios: `sslmode=disable`. The poolers' hop to PostgreSQL is plaintext "
          "in every scenario (`server_tls_sslmode = disable`)")
    w("")

    closed = [(n, sc) for n, sc in res.get("scenarios", {}).items() if sc.get("kind") == "closed"]
    if closed:
        w("## Throughput (closed model: each client sends its next transaction when the last "
          "one is answered)\n")
        w("TPS is pgbench's \"without initial connection time\" (under -C, a connection per "
          "transaction, its \"including reconnection times\"); mean latency is pgbench's "
          "(in a closed model ≈ clients / TPS); pooler CPU µs/txn is the pooler process's "
          "utime+stime over the run (from /proc/PID/stat, connection set-up included) ÷ "
          "transactions; whole-machine CPU µs/txn is that of everything the transaction runs "
          "through — pooler + PostgreSQL (postmaster, backends alive or exited, background "
          "processes) + pgbench — ÷ transactions. "
          "Cells are median (min–max) over the repeats. Ratios are of medians, on the pgsluice "
          "row.\n")
        w("| Scenario | Target | TPS | Mean latency, ms | Failed txns | Pooler CPU µs/txn | "
          "Whole-machine CPU µs/txn | pgsluice / PgBouncer | pgsluice / direct |")
        w("|---|---|---:|---:|---:|---:|---:|---|---|")
        for name, sc in closed:
            runs = sc["runs"]
            tps = {t: field(runs.get(t, []), "tps") for t in TARGETS}
            cpu = {t: field(runs.get(t, []), "cpu_us_per_txn") for t in TARGETS}
            tot = {t: field(runs.get(t, []), "total_cpu_us_per_txn") for t in TARGETS}
            for t in TARGETS:
                rr = runs.get(t, [])
                if not rr:
                    continue
                fail = failure_text(rr)
                tps_cell = fmt_range(tps[t])
                if fail:
                    tps_cell = (tps_cell + "<br>" if tps[t] else "") + fail
                lat = fmt_range(field(rr, "latency_ms"), 2)
                failed = sum(r.get("failed") or 0 for r in rr)
                aborted = sum(r.get("aborted_clients") or 0 for r in rr)
                failed_cell = str(failed) + (f" + {aborted} clients aborted" if aborted else "")
                cpu_cell = fmt_range(cpu[t], 1) if t != "direct" else ""
                r_b = r_d = ""
                if t == "pgsluice":
                    r_b = f"TPS {ratio(tps['pgsluice'], tps['pgbouncer'])}, " \
                          f"CPU {ratio(cpu['pgsluice'], cpu['pgbouncer'])}, " \
                          f"machine {ratio(tot['pgsluice'], tot['pgbouncer'])}"
                    r_d = f"TPS {ratio(tps['pgsluice'], tps['direct'])}, " \
                          f"machine {ratio(tot['pgsluice'], tot['direct'])}"
                w(f"| {TITLE.get(name, name)} | {LABEL[t]} | {tps_cell} | {lat} | {failed_cell} | "
                  f"{cpu_cell} | {fmt_range(tot[t], 1)} | {r_b} | {r_d} |")
        w("")

    for name, rate in res.get("scenarios", {}).items():
        if rate.get("kind") != "rate":
            continue
        lim = rate.get("latency_limit_ms")
        nc = f"{rate['clients']:,}"
        w(f"## Latency at a fixed rate (open model), {nc} clients, "
          f"{100 * rate.get('rate_fraction', 0.5):g} % of direct\n")
        if rate.get("error"):
            w(f"**Not run**: {rate['error']}\n")
            continue
        per = rate.get("transactions_per_client")
        w(f"`pgbench -S -c {rate['clients']} -j 2 --rate={rate['rate']}"
          + (f" -t {per}" if per else "") + (f" -L {lim}" if lim else "") + f" -l`: the rate is "
          f"{rate.get('rate_fraction', 0.5):g} × the direct ceiling "
          f"({fmt(rate.get('direct_ceiling_tps'))} TPS, {rate.get('ceiling_source')}). "
          "Percentiles are computed from the per-transaction logs (every transaction of the run; "
          "under --rate a transaction's latency runs from its scheduled start, so queueing "
          "behind a stall counts), nearest rank; cells are median (min–max) over the repeats."
          + ("" if lim else " No -L: nothing is skipped, the whole tail is in the percentiles.")
          + (f" `-t {per}` rather than -T: as many transactions per client as the run's "
             "duration holds at that rate, counted from the end of the logins (-T would "
             "include them, and 1,000 direct logins take seconds)." if per else "")
          + "\n")
        w("| Target | Achieved TPS | p50, ms | p95, ms | p99, ms | max, ms | Skipped % | "
          "Mean schedule lag, ms | Pooler CPU µs/txn | Whole-machine CPU µs/txn |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        p99 = {}
        for t in TARGETS:
            rr = rate["runs"].get(t, [])
            if not rr:
                continue
            p99[t] = field(rr, "p99_ms")
            fail = failure_text(rr)
            w(f"| {LABEL[t]} | {fmt_range(field(rr, 'tps'))}{'<br>' + fail if fail else ''} | "
              f"{fmt_range(field(rr, 'p50_ms'), 3)} | {fmt_range(field(rr, 'p95_ms'), 3)} | "
              f"{fmt_range(p99[t], 3)} | {fmt_range(field(rr, 'max_ms'), 1)} | "
              f"{fmt_range(field(rr, 'skipped_pct'), 2)} | "
              f"{fmt_range(field(rr, 'mean_lag_ms'), 3)} | "
              f"{fmt_range(field(rr, 'cpu_us_per_txn'), 1) if t != 'direct' else ''} | "
              f"{fmt_range(field(rr, 'total_cpu_us_per_txn'), 1)} |")
        sat = [LABEL[t] for t in TARGETS
               if (x := field(rate["runs"].get(t, []), "tps")) and x[0] < 0.97 * rate["rate"]]
        if sat:
            w(f"\n**Saturated: {', '.join(sat)}** — median achieved TPS is more than 3 % below "
              f"the scheduled rate, so transactions queue without bound and the percentiles "
              "measure that queue (and the run's length), not the latency a pooler adds."
              + (" On 2 shared cores a pooler's own 20-client ceiling is about half the direct "
                 "one, so half the direct ceiling sits at the edge; a busier machine tips it "
                 "over. A lower `--rate-fraction` (the default is 0.25) measures below "
                 "saturation." if rate["clients"] == 20 else ""))
        if p99.get("direct"):
            added = [f"{LABEL[t]} {p99[t][0] - p99['direct'][0]:+.3f} ms"
                     for t in ("pgbouncer", "pgsluice") if p99.get(t)]
            w(f"\np99 added over direct (medians): {', '.join(added)}.")
        w("")

    idle = res.get("scenarios", {}).get("idle_memory")
    if idle:
        n = idle["clients"]
        nn = f"{n:,}".replace(",", " ")
        w(f"## {nn} idle clients: PostgreSQL backends opened and memory\n")
        w(f"`pgbench -c {n} -j 2 -f idle.sql`, where each client runs one "
          "`SELECT abalance …` and then `\\sleep 600 s`; measured 3 s after all clients are "
          "connected. PostgreSQL backends opened: direct, the new client backends; a pooler, "
          "the server backends it keeps open (its sockets matched to the backends' client "
          "ports). Pss from /proc/PID/smaps_rollup (shared pages divided among the processes "
          f"that map them; sum of Rss would count shared_buffers {nn} times): direct, the sum "
          "over its backends; a pooler, its own process, and the sum over its server backends. "
          "Per client: direct = sum ÷ clients; pooler = (process Pss with the clients − Pss "
          "before) ÷ clients. Total: process plus backends. One measurement (memory is not "
          "CPU-noisy).\n")
        w("| Target | Clients connected | PostgreSQL backends opened | Backends' Pss (of it "
          "anon) | Pooler process Pss (before clients) | Per client | Total Pss |")
        w("|---|---:|---:|---:|---:|---:|---:|")
        for t in TARGETS:
            e = idle["targets"].get(t)
            if not e:
                continue
            if t == "direct":
                per = e["pss_kb"] / max(1, e.get("backends") or n) if e.get("pss_kb") else None
                w(f"| {LABEL[t]} | {e.get('connected')} | {e.get('backends')} | "
                  f"{kb(e.get('pss_kb'))} ({kb(e.get('pss_anon_kb'))}) | — | "
                  f"{fmt(per, 0)} kB | {kb(e.get('pss_kb'))} |")
            else:
                per = None
                if e.get("pss_kb") is not None and e.get("pss_before_kb") is not None:
                    per = (e["pss_kb"] - e["pss_before_kb"]) / max(1, e.get("connected") or n)
                total = (e.get("pss_kb") or 0) + (e.get("server_backends_pss_kb") or 0)
                w(f"| {LABEL[t]} | {e.get('connected')} | {e.get('server_backends')} | "
                  f"{kb(e.get('server_backends_pss_kb'))} "
                  f"({kb(e.get('server_backends_pss_anon_kb'))}) | {kb(e.get('pss_kb'))} "
                  f"({kb(e.get('pss_before_kb'))}) | {fmt(per, 1)} kB | {kb(total)} |")
        for t in TARGETS:
            e = idle["targets"].get(t, {})
            if e.get("error") or e.get("pgbench_errors"):
                w(f"\n{LABEL[t]}: {e.get('error', '')} {e.get('pgbench_errors', '')}")
        w("")

    seq = res.get("scenarios", {}).get("pool1_sequential")
    if seq:
        n = seq["clients"]
        w(f"## Pool size 1, {n} sequential clients: PostgreSQL logins\n")
        w(f"Database `{seq.get('database')}` with `pool_size={seq.get('pool_size')}` on both "
          f"poolers; {n} clients one after the other, each its own connection (`psql -c "
          "\"SELECT pg_backend_pid()\"`). Distinct pids: among the backends that answered. "
          "Logins: the delta of `pg_stat_database.sessions` for that database, read once it "
          f"had not moved for {seq.get('settle_s')} s (backends flush it lazily). Direct is the "
          "reference (one login per client); a pooler that keeps its one server connection "
          "shows 1 and 1.\n")
        w("| Target | Clients answered | Distinct backend pids | PostgreSQL logins | "
          "ms per client |")
        w("|---|---:|---:|---:|---:|")
        for t in TARGETS:
            e = seq["targets"].get(t)
            if not e:
                continue
            w(f"| {LABEL[t]} | {e.get('ok')}/{e.get('clients')} | {e.get('distinct_pids')} | "
              f"{'—' if e.get('logins') is None else e['logins']} | "
              f"{fmt(e.get('ms_per_client'), 1)} |")
        for t in TARGETS:
            e = seq["targets"].get(t, {})
            if e.get("errors"):
                w(f"\n{LABEL[t]}: " + "; ".join(f"{k} (×{v})" for k, v in e["errors"].items()))
        w("")

    targets = engine_bars(res)
    if targets:
        w("## The engine's bars (issue 17), on this run\n")
        w("| Bar | Measured (medians) | Met? |")
        w("|---|---|---|")
        for what, measured, met in targets:
            w(f"| {what} | {measured} | {met} |")
        w("\nWith the caveats below: on a shared 2-core machine, differences inside the min–max "
          "ranges are noise.\n")

    targets = production_bars(res)
    if targets:
        w("## Where production runs it: issue 46's bars, on this run\n")
        w("| Bar | Measured (medians) | Met? |")
        w("|---|---|---|")
        for what, measured, met in targets:
            w(f"| {what} | {measured} | {met} |")
        w("\nIssue 46 also asks that the idle, pool-of-1 and prepared-statement scenarios stay "
          "at or better than before: that takes an earlier run to compare with. The same "
          "caveat on ranges holds.\n")

    events = res.get("events") or []
    if events:
        w("## Pooler exits during the run\n")
        for e in events:
            w(f"- {e}")
        w("")

    w("## Every run\n")
    w("| Scenario | Round | Target | Status | TPS | Mean lat., ms | p99, ms | Pooler CPU µs/txn | "
      "PostgreSQL CPU µs/txn | pgbench CPU µs/txn | Whole-machine CPU µs/txn | Connect, ms | "
      "Machine busy % | Load avg |")
    w("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, sc in res.get("scenarios", {}).items():
        if sc.get("kind") in ("idle", "sequential"):  # no pgbench runs
            continue
        rows = [r for t in TARGETS for r in sc["runs"].get(t, [])]
        rows.sort(key=lambda r: (r.get("round", 0)))
        for r in rows:
            w(f"| {SHORT.get(name, name)} | {r.get('round')} | {LABEL[r['target']]} | "
              f"{r.get('status')} | {fmt(r.get('tps'))} | {fmt(r.get('latency_ms'), 2)} | "
              f"{fmt(r.get('p99_ms'), 3)} | {fmt(r.get('cpu_us_per_txn'), 1)} | "
              f"{fmt(r.get('pg_cpu_us_per_txn'), 1)} | "
              f"{fmt(r.get('pgbench_cpu_us_per_txn'), 1)} | "
              f"{fmt(r.get('total_cpu_us_per_txn'), 1)} | {connect_cell(r)} | "
              f"{fmt(r.get('machine_busy_pct'))} | {fmt(r.get('loadavg_before'), 2)} |")
    w("")
    w("Connect is pgbench's initial connection time of all clients, or under -C its average "
      "per connection (marked \"each\"). Whole-machine CPU is pooler + PostgreSQL + pgbench. "
      "Machine busy % is the whole machine's non-idle CPU time during the run (/proc/stat), "
      "including pgbench, PostgreSQL, the pooler and anything else running; raw pgbench output "
      "of every run is in raw/, the pooler and PostgreSQL logs in logs/. See "
      "integration/bench/README.md for the method and the caveats.")
    return "\n".join(out) + "\n"


def scenario_median(sc: dict, name: str, target: str, key: str):
    """The median of `key` over `target`'s runs of scenario `name`; None when not measured."""
    x = sc.get(name, {}).get("runs", {}).get(target)
    s = field(x, key) if x else None
    return s[0] if s else None


def verdict(ok_: bool, how: str = "") -> str:
    """A bar's verdict column: met, or missed with what it needs."""
    return ("met" if ok_ else "**missed**") + (f" ({how})" if how and not ok_ else "")


def engine_bars(res: dict) -> list[tuple[str, str, str]]:
    """The bars of issue 17 ("the engine"), judged on this run's medians."""
    sc = res.get("scenarios", {})
    rows = []

    med = functools.partial(scenario_median, sc)

    for name, what in (("select_only_20", "select-only, 20 clients"),
                       ("select_only_1000", "select-only, 1,000 clients"),
                       ("tpcb_200", "tpcb-like, 200 clients")):
        bt, pt = med(name, "pgbouncer", "tps"), med(name, "pgsluice", "tps")
        if bt and pt:
            rows.append((f"{what}: TPS ≥ 1.0 × PgBouncer's",
                         f"pgsluice {fmt(pt)}, PgBouncer {fmt(bt)}: ratio {pt / bt:.2f}",
                         verdict(pt >= bt, f"{100 * (1 - pt / bt):.0f} % short")))
        bc, pc = med(name, "pgbouncer", "cpu_us_per_txn"), med(name, "pgsluice", "cpu_us_per_txn")
        if not (bc and pc):
            continue
        for limit in [1.0] + ([0.85] if name == "select_only_1000" else []):
            rows.append((f"{what}: pooler CPU/txn ≤ {limit:.2f} × PgBouncer's",
                         f"pgsluice {pc:.1f} µs, PgBouncer {bc:.1f} µs: ratio {pc / bc:.2f}",
                         verdict(pc <= limit * bc, f"needs ≤ {limit * bc:.1f} µs")))
    r = sc.get("rate_select_20")
    if r and not r.get("error"):
        kept = all((x := med("rate_select_20", t, "tps")) and x >= 0.97 * r["rate"]
                   for t in TARGETS)
        for key, label in (("p50_ms", "p50"), ("p99_ms", "p99")):
            d, b, p = (med("rate_select_20", t, key) for t in TARGETS)
            if d is None or b is None or p is None:
                continue
            rows.append((f"added {label} at the fixed rate ≤ PgBouncer's",
                         f"pgsluice {p - d:+.3f} ms, PgBouncer {b - d:+.3f} ms over direct's "
                         f"{d:.3f} ms",
                         verdict(p - d <= b - d) if kept else "not measurable: a target could "
                         "not keep the rate (saturated), see above"))
    idle = sc.get("idle_memory", {})
    e = {t: idle.get("targets", {}).get(t, {}) for t in POOLERS}
    n = f"{idle.get('clients', 0):,}"
    bb, pb = e["pgbouncer"].get("server_backends"), e["pgsluice"].get("server_backends")
    if bb is not None and pb is not None:
        rows.append((f"{n} idle clients: backends ≤ PgBouncer's + 2",
                     f"pgsluice {pb}, PgBouncer {bb}", verdict(pb <= bb + 2)))
    bm, pm = e["pgbouncer"].get("pss_kb"), e["pgsluice"].get("pss_kb")
    if bm is not None and pm is not None:
        rows.append((f"{n} idle clients: pooler Pss ≤ PgBouncer's",
                     f"pgsluice {kb(pm)}, PgBouncer {kb(bm)}",
                     verdict(pm <= bm, f"{pm / bm:.2f} × PgBouncer's")))
    seq = sc.get("pool1_sequential", {}).get("targets", {}).get("pgsluice")
    if seq:
        pids, logins = seq.get("distinct_pids"), seq.get("logins")
        rows.append((f"pool size 1, {seq.get('clients')} sequential clients: 1 backend pid, "
                     "1 login", f"{pids} pid(s), {'—' if logins is None else logins} login(s)",
                     verdict(pids == 1 and logins == 1)))
    return rows


def production_bars(res: dict) -> list[tuple[str, str, str]]:
    """Issue 46's bars ("the engine where production runs it": TLS, a connection per
    transaction, the whole machine's CPU), judged on this run's medians."""
    sc = res.get("scenarios", {})
    rows = []

    med = functools.partial(scenario_median, sc)

    for name in ("select_only_20", "select_only_1000", "tpcb_200", "tls_select_200",
                 "connect_select_50", "tls_connect_select_50"):
        bc, pc = med(name, "pgbouncer", "cpu_us_per_txn"), med(name, "pgsluice", "cpu_us_per_txn")
        if bc and pc:
            rows.append((f"{TITLE.get(name, name)}: pooler CPU/txn ≤ 0.70 × PgBouncer's",
                         f"pgsluice {pc:.1f} µs, PgBouncer {bc:.1f} µs: ratio {pc / bc:.2f}",
                         verdict(pc <= 0.7 * bc, f"needs ≤ {0.7 * bc:.1f} µs")))
    bm, pm = (med("select_only_20", t, "total_cpu_us_per_txn") for t in POOLERS)
    if bm and pm:
        rows.append((f"{TITLE['select_only_20']}: whole-machine CPU/txn ≤ 0.95 × PgBouncer's",
                     f"pgsluice {pm:.1f} µs, PgBouncer {bm:.1f} µs: ratio {pm / bm:.2f}",
                     verdict(pm <= 0.95 * bm, f"needs ≤ {0.95 * bm:.1f} µs")))
    bt, pt = (med("select_only_20", t, "tps") for t in POOLERS)
    if bt and pt:
        rows.append((f"{TITLE['select_only_20']}: TPS ≥ 1.05 × PgBouncer's",
                     f"pgsluice {fmt(pt)}, PgBouncer {fmt(bt)}: ratio {pt / bt:.2f}",
                     verdict(pt >= 1.05 * bt, f"needs ≥ {fmt(1.05 * bt)}")))
    for name in ("rate_select_1000_25", "rate_select_1000_75"):
        r = sc.get(name)
        if not r or r.get("error"):
            continue
        d, b, p = (med(name, t, "p99_ms") for t in TARGETS)
        if b is None or p is None:
            continue
        # Direct at 1,000 clients may not keep the rate (1,000 fresh backends): "added" is then
        # against a direct p99 that measures its queue, the same for both poolers, so the bar
        # compares the poolers' own p99s; a pooler that did not keep the rate cannot be judged.
        kept = all((x := med(name, t, "tps")) and x >= 0.97 * r["rate"] for t in POOLERS)
        base = f" over direct's {d:.3f} ms" if d is not None else ""
        rows.append((f"{TITLE.get(name, name)}: added p99 ≤ PgBouncer's",
                     f"pgsluice {p - (d or 0):+.3f} ms, PgBouncer {b - (d or 0):+.3f} ms{base}",
                     verdict(p <= b) if kept else "not measurable: a pooler could not keep the "
                     "rate (saturated), see above"))
    return rows


# --------------------------------------------------------------------------------------------
# SVG (hand-written: no plotting library needed)


def nice_max(v: float) -> tuple[float, float]:
    """(axis top, tick step) for a maximum value v."""
    if v <= 0:
        return 1.0, 0.2
    raw = v / 5
    mag = 10 ** math.floor(math.log10(raw))
    for f in (1, 2, 2.5, 5, 10):
        if raw <= f * mag:
            step = f * mag
            break
    return step * math.ceil(v / step), step


def short_num(x: float) -> str:
    if x >= 10000:
        return f"{x / 1000:.0f}k"
    if x >= 1000:
        return f"{x / 1000:.1f}k"
    if x >= 10:
        return f"{x:.0f}"
    if x >= 1:
        return f"{x:.1f}"
    if x == 0:
        return "0"
    return f"{x:.2f}"


def bar_panel(x0, y0, w, h, title, ylabel, groups, series, data, colors, labels):
    """Grouped bars with min–max whiskers. data[group][series] = (med, lo, hi) | 'failed' | None."""
    e = []
    top = 0.0
    for g in groups:
        for s in series:
            d = data.get(g, {}).get(s)
            if isinstance(d, tuple):
                top = max(top, d[2])
    ymax, step = nice_max(top * 1.08 if top else 1)
    left, right, tpad, bpad = 62, 10, 34, 48
    pw, ph = w - left - right, h - tpad - bpad
    px, py = x0 + left, y0 + tpad

    def Y(v):
        return py + ph - ph * v / ymax

    e.append(f'<text x="{x0 + w / 2}" y="{y0 + 16}" text-anchor="middle" '
             f'font-weight="bold">{html.escape(title)}</text>')
    t = 0.0
    while t <= ymax + 1e-9:
        yy = Y(t)
        e.append(f'<line x1="{px}" y1="{yy:.1f}" x2="{px + pw}" y2="{yy:.1f}" stroke="#ddd"/>')
        e.append(f'<text x="{px - 5}" y="{yy + 4:.1f}" text-anchor="end" font-size="11">'
                 f'{short_num(t)}</text>')
        t += step
    e.append(f'<text transform="translate({x0 + 14},{py + ph / 2}) rotate(-90)" '
             f'text-anchor="middle" font-size="11">{html.escape(ylabel)}</text>')
    e.append(f'<line x1="{px}" y1="{py + ph}" x2="{px + pw}" y2="{py + ph}" stroke="#333"/>')
    gw = pw / max(1, len(groups))
    bw = gw * 0.8 / max(1, len(series))
    for gi, g in enumerate(groups):
        gx = px + gi * gw + gw * 0.1
        e.append(f'<text x="{px + gi * gw + gw / 2:.1f}" y="{py + ph + 16}" text-anchor="middle" '
                 f'font-size="11">{html.escape(g)}</text>')
        for si, s in enumerate(series):
            d = data.get(g, {}).get(s)
            bx = gx + si * bw
            if d == "failed":
                e.append(f'<text x="{bx + bw / 2 + 3:.1f}" y="{py + ph - 4}" text-anchor="start" '
                         f'font-size="10" fill="{colors[s]}" transform="rotate(-90 '
                         f'{bx + bw / 2 + 3:.1f} {py + ph - 4})">failed</text>')
                continue
            if not isinstance(d, tuple):
                continue
            med, lo, hi = d
            e.append(f'<rect x="{bx + 1:.1f}" y="{Y(med):.1f}" width="{bw - 2:.1f}" '
                     f'height="{py + ph - Y(med):.1f}" fill="{colors[s]}"><title>'
                     f'{html.escape(labels[s])} {html.escape(g)}: {med:.3g} ({lo:.3g}–{hi:.3g})'
                     f'</title></rect>')
            if hi > lo:
                cx = bx + bw / 2
                e.append(f'<line x1="{cx:.1f}" y1="{Y(lo):.1f}" x2="{cx:.1f}" y2="{Y(hi):.1f}" '
                         f'stroke="#000"/>')
                for yy in (Y(lo), Y(hi)):
                    e.append(f'<line x1="{cx - 3:.1f}" y1="{yy:.1f}" x2="{cx + 3:.1f}" '
                             f'y2="{yy:.1f}" stroke="#000"/>')
            e.append(f'<text x="{bx + bw / 2:.1f}" y="{min(Y(med), Y(hi)) - 3:.1f}" '
                     f'text-anchor="middle" font-size="9">{short_num(med)}</text>')
    lx = px
    for s in series:
        e.append(f'<rect x="{lx}" y="{y0 + h - 16}" width="10" height="10" fill="{colors[s]}"/>')
        e.append(f'<text x="{lx + 14}" y="{y0 + h - 7}" font-size="11">'
                 f'{html.escape(labels[s])}</text>')
        lx += 14 + 8 * len(labels[s]) + 14
    return e


def svg(res: dict) -> str:
    sc = res.get("scenarios", {})
    panels = []
    closed = [n for n in ("select_only_20", "select_only_200", "select_only_1000",
                          "prepared_select_50", "tpcb_200", "tls_select_200",
                          "connect_select_50", "tls_connect_select_50") if n in sc]
    if closed:
        data = {}
        for n in closed:
            data[SHORT[n]] = {}
            for t in TARGETS:
                rr = sc[n]["runs"].get(t, [])
                s = field(rr, "tps")
                data[SHORT[n]][t] = s if s else ("failed" if rr else None)
        panels.append(("TPS by scenario and clients (median, min–max)", "transactions/s",
                       [SHORT[n] for n in closed], TARGETS, data))
        cdata = {}
        for n in closed:
            cdata[SHORT[n]] = {}
            for t in ("pgbouncer", "pgsluice"):
                rr = sc[n]["runs"].get(t, [])
                s = field(rr, "cpu_us_per_txn")
                cdata[SHORT[n]][t] = s if s else ("failed" if rr else None)
        panels.append(("Pooler CPU per transaction", "µs of CPU / transaction",
                       [SHORT[n] for n in closed], ["pgbouncer", "pgsluice"], cdata))
    if "rate_select_20" in sc and not sc["rate_select_20"].get("error"):
        r = sc["rate_select_20"]
        data = {}
        for q in ("p50", "p95", "p99"):
            data[q] = {}
            for t in TARGETS:
                rr = r["runs"].get(t, [])
                s = field(rr, f"{q}_ms")
                data[q][t] = s if s else ("failed" if rr else None)
        sat = any((x := field(r["runs"].get(t, []), "tps")) and x[0] < 0.97 * r["rate"]
                  for t in TARGETS)
        panels.append((f"Latency at --rate={r['rate']} (-S, 20 clients)"
                       + (" — SATURATED" if sat else ""), "ms",
                       ["p50", "p95", "p99"], TARGETS, data))
    many = [n for n in ("rate_select_1000_25", "rate_select_1000_75")
            if n in sc and not sc[n].get("error")]
    if many:
        data = {}
        for n in many:
            data[SHORT[n]] = {}
            for t in TARGETS:
                rr = sc[n]["runs"].get(t, [])
                s = field(rr, "p99_ms")
                data[SHORT[n]][t] = s if s else ("failed" if rr else None)
        panels.append(("p99 at fixed rates, 1,000 clients", "ms", [SHORT[n] for n in many],
                       TARGETS, data))
    # Wider with more panels, so that eight closed scenarios' bars stay readable.
    W, H = max(1200, 400 * len(panels)), 380
    pw = W / max(1, len(panels))
    body = []
    for i, (title, ylabel, groups, series, data) in enumerate(panels):
        body += bar_panel(i * pw, 24, pw, H - 24, title, ylabel, groups, series, data, COLOR,
                          LABEL)
    head = (f"pgsluice benchmark {res.get('started', '')} — {res.get('machine', {}).get('cpus')} "
            f"CPUs, {res.get('settings', {}).get('repeats')} repeat(s) × "
            f"{res.get('settings', {}).get('duration_s')} s")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">\n'
            f'<rect width="100%" height="100%" fill="#fff"/>\n'
            f'<text x="8" y="16" font-size="12" fill="#555">{html.escape(head)}</text>\n'
            + "\n".join(body) + "\n</svg>\n")


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "out", "results.json")
    with open(path) as f:
        res = json.load(f)
    d = os.path.dirname(os.path.abspath(path))
    with open(os.path.join(d, "results.md"), "w") as f:
        f.write(markdown(res))
    with open(os.path.join(d, "results.svg"), "w") as f:
        f.write(svg(res))
    print(markdown(res))
