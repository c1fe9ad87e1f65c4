"""Experiment 1: what an idle connection costs. N pgbench clients run one select each and sleep
(the article's idle.sql), directly and through each pooler; then the memory is read from /proc:
Pss (not Rss: shared_buffers would be counted once per backend) over the client backends, the
pooler's own Pss and the Pss of the server backends it keeps, and page tables (VmPTE per process,
and the PageTables delta of /proc/meminfo, which is machine-wide and so includes others' noise)."""

from __future__ import annotations

import time

import charts
import seed
import stand as st
from stand import log
import measure

SHARED_BUFFERS_MB = 256  # stand/postgresql.conf
LIMIT_MB = 2048          # the article's container limit


def mb(kb) -> float | None:
    return None if kb is None else kb / 1024.0


def f1(v, digits=1) -> str:
    return "—" if v is None else f"{v:,.{digits}f}".replace(",", " ")


def measure_idle(stand, target: st.Target, n: int, script: str, settle: float) -> dict:
    direct = target.name == "direct"
    base = set(stand.backends())
    before = measure.smaps_rollup(target.pid) if target.pid else {}
    pte_before = measure.proc_status_kb(target.pid, "VmPTE") if target.pid else None
    pt0 = measure.meminfo_kb("PageTables")
    bg = st.Background(target.pgbench_cmd(["-n", "-c", str(n), "-j", "2", "-T", "3600",
                                           "-f", script]))
    entry: dict = {"target": target.name, "clients": n}
    try:
        def connected() -> int:
            if direct:
                return len(set(stand.backends()) - base)
            return measure.established_on_port(target.port, target.pid)

        st.wait_until(lambda: connected() >= n or not bg.alive(), 60 + n * 0.2)
        entry["connected"] = connected()
        if not bg.alive():
            entry["error"] = (f"pgbench exited before all clients connected "
                              f"({entry['connected']}/{n})")
        time.sleep(settle)  # every client has run its select and sleeps now
        now = set(stand.backends())
        entry["pagetables_meminfo_delta_kb"] = measure.meminfo_kb("PageTables") - pt0
        if direct:
            with stand.superuser() as c:  # sleeping clients, not busy ones
                entry["idle_in_pg_stat_activity"] = c.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND datname = %s "
                    "AND state = 'idle'", (st.USER, st.DB)).fetchone()[0]
            pids = now - base
            mems = [measure.smaps_rollup(p) for p in pids]
            entry["backends"] = len(pids)
            entry["readable"] = sum(1 for m in mems if m)
            for k in ("rss", "pss", "pss_anon", "pss_shmem"):
                entry[k + "_kb"] = sum(m.get(k, 0) for m in mems)
            entry["vmpte_kb"] = sum(measure.proc_status_kb(p, "VmPTE") or 0 for p in pids)
            entry["total_kb"] = entry["pss_kb"] + entry["vmpte_kb"]
        else:
            after = measure.smaps_rollup(target.pid) if target.pid else {}
            servers = (measure.backends_of(target.pid, stand.pg_port, list(now))
                       if target.pid else [])
            smems = [measure.smaps_rollup(p) for p in servers]
            entry["pooler_pss_before_kb"] = before.get("pss")
            entry["pooler_pss_kb"] = after.get("pss")
            entry["pooler_rss_kb"] = after.get("rss")
            entry["pooler_vmpte_kb"] = (measure.proc_status_kb(target.pid, "VmPTE")
                                        if target.pid else None)
            entry["pooler_vmpte_before_kb"] = pte_before
            entry["server_backends"] = len(servers)
            entry["servers_pss_kb"] = sum(m.get("pss", 0) for m in smems)
            entry["servers_pss_anon_kb"] = sum(m.get("pss_anon", 0) for m in smems)
            entry["servers_vmpte_kb"] = sum(measure.proc_status_kb(p, "VmPTE") or 0
                                            for p in servers)
            if entry["pooler_pss_kb"] is not None:
                entry["total_kb"] = (entry["pooler_pss_kb"] + (entry["pooler_vmpte_kb"] or 0)
                                     + entry["servers_pss_kb"] + entry["servers_vmpte_kb"])
            else:
                entry["error"] = "the pooler's process is not visible from here"
    finally:
        rc = bg.stop()
    errs = measure.parse_pgbench("", bg.err, 0)["errors"]
    if errs:
        entry["pgbench_errors"] = errs
    entry["pgbench_rc"] = rc
    # the clients must be gone before the next measurement
    if direct:
        st.wait_until(lambda: not (set(stand.backends()) - base), 60)
    else:
        st.wait_until(lambda: measure.established_on_port(target.port, target.pid) == 0, 60)
    log(f"  cost {target.name:<9} {n} clients: connected {entry.get('connected')}, "
        f"total {f1(mb(entry.get('total_kb')))} MB")
    return entry


def run(stand, args) -> dict:
    scale = args.scale or (1 if args.short else 10)
    counts = args.clients or ([50] if args.short else [500, 1000])
    log(f"pgbench -i -s {scale}")
    stand.pgbench_init(scale)
    targets = [stand.targets["direct"], stand.pgsluice()]
    if stand.pgbouncer():
        targets.append(stand.pgbouncer())
    tmp = st.temp_dir("pgsluice-workshop-")
    script = st.idle_script(tmp, scale)
    rows = []
    try:
        for n in counts:
            for t in targets:
                rows.append(measure_idle(stand, t, n, script, settle=1 if args.short else 3))
    finally:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    return {"experiment": "cost", "scale": scale, "counts": counts,
            "targets": [t.name for t in targets],
            "labels": {t.name: t.label for t in targets}, "rows": rows}


def check(res: dict) -> list[str]:
    """What must hold for the report to mean anything (the CI test relies on it)."""
    problems = []
    for r in res["rows"]:
        if r.get("error"):
            problems.append(f"{r['target']} {r['clients']}: {r['error']}")
        elif r["target"] == "direct":
            if r["backends"] < r["clients"] or r["readable"] < r["clients"] or not r["pss_kb"]:
                problems.append(f"direct {r['clients']}: {r['backends']} backends, "
                                f"{r['readable']} readable smaps_rollup")
            if r.get("idle_in_pg_stat_activity", 0) < r["clients"]:
                problems.append(f"direct {r['clients']}: only {r.get('idle_in_pg_stat_activity')} "
                                f"backends idle")
        else:
            if r.get("connected", 0) < r["clients"]:
                problems.append(f"{r['target']} {r['clients']}: {r.get('connected')} connected")
            if not r.get("server_backends"):
                problems.append(f"{r['target']} {r['clients']}: no server backend found")
    return problems


def markdown(res: dict) -> str:
    labels = res["labels"]
    out = ["## Experiment 1: what an idle connection costs", "",
           f"pgbench -c N -f idle.sql (one `SELECT abalance …`, then `\\sleep`), scale "
           f"{res['scale']}; memory read from /proc after all clients are connected. MB = MiB.",
           "", seed.article_note(), "",
           "### N idle backends, direct (the article's mem.sh)", "",
           "| | backends | Rss sum | Pss sum | Pss_Anon | Pss_Shmem | avg Pss | "
           "page tables (Σ VmPTE) | PageTables Δ (meminfo) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n, s in seed.COST.items():
        pt = f"{s['pagetables_mb']} (memory.stat)" if "pagetables_mb" in s else "—"
        out.append(f"| *article*, {f1(n, 0)} | {f1(n, 0)} | {f1(s['rss_mb'], 0)} | "
                   f"{f1(s['pss_mb'], 0)} | {f1(s['pss_anon_mb'], 0)} | {s['pss_shmem_mb']} | "
                   f"{s['avg_pss_mb']:.2f} | {pt} | — |")
    for r in res["rows"]:
        if r["target"] != "direct" or r.get("error"):
            continue
        n = max(1, r["backends"])
        out.append(f"| this machine, {r['clients']} | {r['backends']} | {f1(mb(r['rss_kb']), 0)} | "
                   f"{f1(mb(r['pss_kb']), 0)} | {f1(mb(r['pss_anon_kb']), 0)} | "
                   f"{f1(mb(r['pss_shmem_kb']), 0)} | {f1(mb(r['pss_kb']) / n, 2)} | "
                   f"{f1(mb(r['vmpte_kb']), 0)} | {f1(mb(r['pagetables_meminfo_delta_kb']), 0)} |")
    out += ["", "### The same clients, direct and through the poolers", "",
            "| target | clients | connected | pooler Pss: before → with clients | pooler page "
            "tables | server backends | their Pss | Pss + page tables, all processes "
            "| per client |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        lab = labels.get(r["target"], r["target"])
        if r.get("error"):
            out.append(f"| {lab} | {r['clients']} | {r.get('connected', '—')} | "
                       f"**{r['error']}** | | | | | |")
            continue
        per = f1(mb(r["total_kb"]) / r["clients"], 2)
        if r["target"] == "direct":
            out.append(f"| {lab} | {r['clients']} | {r['backends']} | — | — | "
                       f"{r['backends']} | "
                       f"{f1(mb(r['pss_kb']))} MB | {f1(mb(r['total_kb']))} MB | {per} MB |")
        else:
            out.append(f"| {lab} | {r['clients']} | {r['connected']} | "
                       f"{f1(mb(r['pooler_pss_before_kb']))} → {f1(mb(r['pooler_pss_kb']))} MB | "
                       f"{f1(mb(r['pooler_vmpte_kb']), 2)} MB | {r['server_backends']} | "
                       f"{f1(mb(r['servers_pss_kb']))} MB | {f1(mb(r['total_kb']))} MB | "
                       f"{per} MB |")
    direct = [r for r in res["rows"] if r["target"] == "direct" and not r.get("error")]
    if direct:
        r = max(direct, key=lambda x: x["clients"])
        total = mb(r["total_kb"])
        left = LIMIT_MB - SHARED_BUFFERS_MB - total
        out += ["", f"Under the article's {LIMIT_MB} MB container limit, {r['clients']} idle direct "
                    f"backends ({f1(total, 0)} MB of Pss and page tables) plus {SHARED_BUFFERS_MB} "
                    f"MB of shared_buffers leave {f1(left, 0)} MB before the first query's "
                    f"work_mem (the article at 1 000: about 140 MB left, then OOM-killed under "
                    f"pgbench -S). Through a pooler the same clients cost "
                    + ", ".join(f"{f1(mb(x['total_kb']), 0)} MB ({res['labels'][x['target']]})"
                                for x in res["rows"] if x["target"] != "direct"
                                and x["clients"] == r["clients"] and x.get("total_kb"))
                    + " including the server backends."]
    out += backends_paragraph(res)
    out += ["", "Pss divides each shared page among the processes that map it, so the sums add "
                "up; Rss counts shared_buffers once per backend. Σ VmPTE is exact per process; "
                "the PageTables delta is the whole machine's and moves with other people's work "
                "on this shared machine. A pooled client costs the pooler's Pss growth plus its "
                "share of the server backends it keeps.", ""]
    for n, s in seed.COST.items():
        out.append(f"- the article at {n}: {s['note']}")
    return "\n".join(out) + "\n"


def backends_of(r: dict) -> int | None:
    return r.get("backends") if r["target"] == "direct" else r.get("server_backends")


def backends_paragraph(res: dict) -> list[str]:
    """What the poolers' totals are made of: mostly the server backends each kept, which the
    pooler chooses (it grows its pool while the clients connect and run their one query)."""
    out = []
    for n in res["counts"]:
        pooled = [r for r in res["rows"] if r["clients"] == n and r["target"] != "direct"
                  and r.get("total_kb") and r.get("server_backends")]
        if not pooled:
            continue
        parts = []
        for r in pooled:
            servers = r["servers_pss_kb"] + r["servers_vmpte_kb"]
            k = r["server_backends"]
            parts.append(f"{res['labels'][r['target']]} kept {k} server backend"
                         f"{'' if k == 1 else 's'} ({f1(mb(servers))} MB, "
                         f"{100 * servers / r['total_kb']:.0f} % of its total; "
                         f"{f1(mb(servers) / k)} MB each) and itself took "
                         f"{f1(mb(r['pooler_pss_kb'] + (r['pooler_vmpte_kb'] or 0)))} MB")
        out.append(f"At {n} clients " + "; ".join(parts) + ".")
    if out:
        out.append("How many backends a pooler keeps is the pool it grew while the clients "
                   "connected and ran their first query (pool_size 20 for both), not a cost per "
                   "client: compare the totals with the backend counts beside them (right-hand "
                   "panel of the chart). A backend's Pss also grows with the shared_buffers "
                   "pages it touched, so one backend that served every client weighs more than "
                   "each of several that shared the work.")
    return ["", "### Where the pooled totals go", ""] + out if out else []


def svg(res: dict) -> str:
    groups = [f"{n} clients" for n in res["counts"]]
    total = {g: {} for g in groups}
    kept = {g: {} for g in groups}
    for r in res["rows"]:
        g = f"{r['clients']} clients"
        total[g][r["target"]] = mb(r["total_kb"]) if r.get("total_kb") else None
        b = backends_of(r)
        kept[g][r["target"]] = float(b) if b else None
    labels = res["labels"]
    what = [f"N pgbench clients each run one SELECT, then sleep (idle); memory read from /proc "
            f"once all are connected; pgbench -s {res['scale']}.",
            "Left: Pss + page tables of every process involved (the backends, and the pooler "
            "itself). Right: the PostgreSQL backends that serve them.",
            "Targets: " + ", ".join(f"{labels[t]}" for t in res["targets"])
            + " (poolers in transaction mode, pool_size 20)."]
    return charts.bars("Experiment 1: what idle connections cost",
                       [("Pss + page tables, all processes (MB)", "MB", groups, res["targets"],
                         total),
                        ("PostgreSQL backends (direct: one per client)", "backends", groups,
                         res["targets"], kept)],
                       width=1000, what=what, res=res)
