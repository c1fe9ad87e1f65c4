"""What integration/bench/run and integration/workshop/run both measure: /proc readings (Pss from
smaps_rollup, page tables, CPU time), which backends belong to whom, and pgbench's output.

Standard library only, no state: every function reads /proc or parses text when called.
"""

from __future__ import annotations

import os
import re

CLK_TCK = os.sysconf("SC_CLK_TCK")

# --------------------------------------------------------------------------------------------
# /proc readings


def proc_cpu_seconds(pid: int) -> float | None:
    """utime + stime of the whole process (all threads), from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def postgres_cpu_seconds(postmaster_pid: int | None) -> float | None:
    """CPU seconds (user + system) that the PostgreSQL server has used so far: the postmaster's
    own, that of its children that have exited (cutime + cstime: the kernel adds a child's
    times to its parent's when the parent reaps it, so a backend that lived and died between
    two readings is counted whole), and that of its children alive now (backends, background
    workers, checkpointer ...). The difference of two readings is what the server spent in
    between, whether its backends outlived the interval (a pooler's servers) or not (direct
    clients, one backend per connection under pgbench -C). A child reaped between the two
    reads inside this function is missed or counted twice: read once the backends of a run
    have gone or while they stay."""
    if postmaster_pid is None:
        return None
    try:
        with open(f"/proc/{postmaster_pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # After the ")" of comm: utime, stime, cutime, cstime are fields 14-17, index 11-14.
        total = sum(int(x) for x in fields[11:15])
    except (OSError, IndexError, ValueError):
        return None
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == postmaster_pid:
                total += sum(int(x) for x in fields[11:15])
        except (OSError, IndexError, ValueError):
            pass
    return total / CLK_TCK


def smaps_rollup(pid: int) -> dict:
    """kB of rss, pss, pss_anon, pss_shmem from /proc/PID/smaps_rollup ({} if unreadable: the
    process is gone, or we may not ptrace it)."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[0] in ("Rss:", "Pss:", "Pss_Anon:", "Pss_Shmem:"):
                    out[parts[0][:-1].lower()] = int(parts[1])  # kB
    except OSError:
        pass
    return out


def proc_status_kb(pid: int, key: str) -> int | None:
    """A kB field of /proc/PID/status, e.g. VmPTE (this process's page tables)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def meminfo_kb(key: str) -> int | None:
    """A kB field of /proc/meminfo, e.g. PageTables (the whole machine's)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    total = sum(v[:8])
    return total - idle, total


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def established_on_port(port: int, netns_pid: int | None = None) -> int:
    """Established TCP connections whose local port is `port` (the server side), in our network
    namespace or in that of process netns_pid (a pooler in another container)."""
    seen = set()  # /proc/net/tcp is not read atomically: the same socket may show up twice
    hexport = f"{port:04X}"
    net = f"/proc/{netns_pid}/net" if netns_pid else "/proc/net"
    for path in (f"{net}/tcp", f"{net}/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "01" and parts[1].rsplit(":", 1)[1] == hexport:
                        seen.add((parts[1], parts[2]))
        except OSError:
            pass
    return len(seen)


def pid_listening_on(port: int, comm: str | None = None) -> int | None:
    """The process (named `comm`, if given) that has a socket listening on TCP `port` in its
    network namespace: the pooler of a stand we did not start (compose, shared PID namespace)."""
    hexport = f"{port:04X}"
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if comm is not None:
                with open(f"/proc/{name}/comm") as f:
                    if f.read().strip() != comm:
                        continue
            listening = set()
            for path in (f"/proc/{name}/net/tcp", f"/proc/{name}/net/tcp6"):
                with open(path) as f:
                    next(f)
                    for line in f:
                        parts = line.split()
                        if parts[3] == "0A" and parts[1].rsplit(":", 1)[1] == hexport:
                            listening.add(parts[9])
            if not listening:
                continue
            for fd in os.listdir(f"/proc/{name}/fd"):
                link = os.readlink(f"/proc/{name}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in listening:
                    return int(name)
        except OSError:
            continue
    return None


# --------------------------------------------------------------------------------------------
# PostgreSQL backends


def client_backends(postmaster_pid: int | None, user: str, db: str) -> list[int]:
    """PIDs of the client backends of user@db: processes titled "postgres: USER DB …" (whose
    parent is the postmaster, when its PID is known)."""
    prefix = f"postgres: {user} {db} ".encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if not f.read().startswith(prefix):
                    continue
            if postmaster_pid is not None:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) != postmaster_pid:
                        continue
            pids.append(int(name))
        except (OSError, ValueError, IndexError):
            pass
    return pids


def backends_of(pooler_pid: int, pg_port: int, candidates: list[int]) -> list[int]:
    """Those of `candidates` (backend PIDs) that serve a pooler's server connections: the
    pooler's sockets connected to pg_port, matched by client port with the backends'
    "HOST(PORT)" process titles."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pooler_pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pooler_pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return []
    ports = set()
    hexport = f"{pg_port:04X}"
    # The pooler's own view of its sockets: right also when it runs in another network namespace.
    for path in (f"/proc/{pooler_pid}/net/tcp", f"/proc/{pooler_pid}/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[2].rsplit(":", 1)[1] == hexport and parts[9] in inodes:
                        ports.add(int(parts[1].rsplit(":", 1)[1], 16))
        except OSError:
            pass
    pids = []
    for pid in candidates:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                m = re.search(rb"\((\d+)\)", f.read())
            if m and int(m.group(1)) in ports:
                pids.append(pid)
        except OSError:
            pass
    return pids


# --------------------------------------------------------------------------------------------
# pgbench


def parse_pgbench(out: str, err: str, rc: int) -> dict:
    def num(pattern, text=out, conv=float):
        m = re.search(pattern, text, re.MULTILINE)
        return conv(m.group(1)) if m else None

    r = {
        "rc": rc,
        # Under -C (a connection per transaction) pgbench counts the connections in: "tps = …
        # (including reconnection times)" and "average connection time", per connection.
        "tps": num(r"^tps = ([\d.]+) \((?:without initial connection|including reconnection) "
                   r"times?\)"),
        "transactions": num(r"^number of transactions actually processed: (\d+)", conv=int),
        "failed": num(r"^number of failed transactions: (\d+)", conv=int),
        "skipped": num(r"^number of transactions skipped: (\d+)", conv=int),
        "latency_ms": num(r"^latency average = ([\d.]+) ms"),
        "connect_ms": num(r"^initial connection time = ([\d.]+) ms"),
        "connection_avg_ms": num(r"^average connection time = ([\d.]+) ms"),  # under -C
    }
    aborted = "Run was aborted" in out + err or rc != 0
    errors: dict[str, int] = {}
    for line in err.splitlines():
        if "error" not in line.lower() and "FATAL" not in line:
            continue
        m = re.search(r"(?:ERROR|FATAL):\s+(.*)", line)
        key = m.group(0) if m else re.sub(r"client \d+", "client N", line.strip())
        key = re.sub(r"\s+", " ", key)
        errors[key] = errors.get(key, 0) + 1
    r["errors"] = dict(sorted(errors.items(), key=lambda kv: -kv[1])[:8])
    r["aborted_clients"] = len(re.findall(r"client \d+ (?:script \d+ )?aborted", err))
    r["status"] = "failed" if aborted else "ok"
    return r


def latency_from_logs(paths: list[str]) -> dict:
    """p50/p95/p99/max (ms, nearest rank) and skipped % from pgbench -l per-transaction logs.
    Under --rate the third column is now - scheduled start, so schedule lag is included."""
    lat: list[int] = []
    lag_sum = 0
    skipped = failed = 0
    for path in paths:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                v = parts[2]
                if v.isdigit():
                    lat.append(int(v))
                    if len(parts) >= 7 and parts[6].isdigit():
                        lag_sum += int(parts[6])
                elif v == "skipped":
                    skipped += 1
                elif v == "failed":
                    failed += 1
    total = len(lat) + skipped + failed
    if not lat:
        return {"logged": total, "skipped": skipped, "failed_logged": failed}
    lat.sort()

    def pct(q):
        return lat[-(-len(lat) * q // 100) - 1] / 1000.0

    return {
        "logged": total, "skipped": skipped, "failed_logged": failed,
        "skipped_pct": 100.0 * skipped / total if total else 0.0,
        "p50_ms": pct(50), "p95_ms": pct(95), "p99_ms": pct(99), "max_ms": lat[-1] / 1000.0,
        "mean_ms": sum(lat) / len(lat) / 1000.0, "mean_lag_ms": lag_sum / len(lat) / 1000.0,
    }
