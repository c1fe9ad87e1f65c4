"""A Patroni stand on loopback for integration/test_patroni.py (issue 45): one etcd (Debian's
etcd-server, 3.4) and three PostgreSQL 15 nodes managed by Debian's Patroni 3.0, each in its own
temp dir, with synchronous_mode on. Patroni (and so initdb and postgres) runs as the postgres OS
user when the tests run as root.

Every process is started here and stopped by its own PID: etcd and each Patroni by SIGTERM (a
Patroni stops its PostgreSQL with it), then any postmaster left (a node whose Patroni was gone
first) by pg_ctl stop -m immediate on its data dir.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.request

import harness

PG15_BIN = "/usr/lib/postgresql/15/bin"
SCOPE = "pgsluice"


def missing() -> str | None:
    """Why the stand cannot run here, or None."""
    for tool, package in (("etcd", "etcd-server"), ("patroni", "patroni"),
                          ("patronictl", "patroni")):
        if shutil.which(tool) is None:
            return f"{tool} not installed (Debian's {package}; scripts/install-deps installs it)"
    if not os.access(os.path.join(PG15_BIN, "postgres"), os.X_OK):
        return f"PostgreSQL 15 not installed in {PG15_BIN}"
    return None


def _user_kwargs() -> dict:
    if harness.is_root():
        return {"user": "postgres", "group": "postgres", "extra_groups": []}
    return {}


class Node:
    def __init__(self, stand: "PatroniStand", name: str):
        self.name = name
        self.dir = os.path.join(stand.dir, name)
        os.makedirs(self.dir, mode=0o700)
        harness.chown_postgres(self.dir)
        self.data = os.path.join(self.dir, "data")
        self.port = harness.free_port()
        self.rest_port = harness.free_port()
        self.config = os.path.join(self.dir, "patroni.yml")
        self.log_path = os.path.join(self.dir, "patroni.log")
        self.proc: subprocess.Popen | None = None
        with open(self.config, "w") as f:
            f.write(stand.node_config(self))
        harness.chown_postgres(self.config)

    def start(self) -> None:
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                ["patroni", self.config], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=self.dir,
                env=harness.clean_env(HOME=self.dir), **_user_kwargs())
        finally:
            log.close()

    def postmaster_pid(self) -> int | None:
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None

    def connect(self, **kwargs):
        """A direct psycopg connection over the Unix socket as postgres (local trust)."""
        import psycopg
        return psycopg.connect(host=self.dir, port=self.port, user="postgres",
                               dbname=kwargs.pop("dbname", "postgres"), autocommit=True,
                               connect_timeout=2, **kwargs)

    def psql(self, sql: str, db: str = "postgres") -> str:
        rc, out, err = harness.run(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-At", "-h", self.dir,
                                    "-p", str(self.port), "-U", "postgres", "-d", db, "-c", sql],
                                   timeout=60)
        if rc != 0:
            raise RuntimeError(f"psql on {self.name} failed ({rc}): {sql}\n{err}")
        return out.strip()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.postmaster_pid() is not None and os.path.exists(self.data):
            harness.run(harness.as_postgres([f"{PG15_BIN}/pg_ctl", "-D", self.data, "-m",
                                             "immediate", "-w", "-t", "30", "stop"]), timeout=60)


class PatroniStand:
    """etcd and three Patroni nodes; start() returns once a leader and two streaming replicas
    (one of them the synchronous standby) are up, with role app, database app and table acks."""

    def __init__(self, nodes: int = 3):
        self.dir = tempfile.mkdtemp(prefix="pgsluice-patroni-")
        os.chmod(self.dir, 0o755)
        self.etcd_port = harness.free_port()
        self.etcd_peer_port = harness.free_port()
        self.etcd_proc: subprocess.Popen | None = None
        self.etcd_log = os.path.join(self.dir, "etcd.log")
        self.nodes = [Node(self, f"node{i + 1}") for i in range(nodes)]

    # -- configuration ------------------------------------------------------------------------

    def node_config(self, node: Node) -> str:
        """Patroni's YAML for `node` (docs/ha.md shows the same, with real addresses)."""
        return f"""scope: {SCOPE}
name: {node.name}
log:
  level: INFO
restapi:
  listen: {harness.HOST}:{node.rest_port}
  connect_address: {harness.HOST}:{node.rest_port}
etcd3:
  hosts: {harness.HOST}:{self.etcd_port}
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 100
        wal_level: replica
        hot_standby: 'on'
        wal_log_hints: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
  initdb:
    - encoding: UTF8
    - locale: C
postgresql:
  listen: {harness.HOST}:{node.port}
  connect_address: {harness.HOST}:{node.port}
  data_dir: {node.data}
  bin_dir: {PG15_BIN}
  pgpass: {node.dir}/pgpass
  use_unix_socket: true
  basebackup:
    - checkpoint: fast
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
    rewind:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: '{node.dir}'
    password_encryption: scram-sha-256
    shared_buffers: 32MB
    fsync: 'off'
    full_page_writes: 'on'
    logging_collector: 'off'
    log_min_messages: warning
  pg_hba:
    - local all all trust
    - local replication all trust
    - host replication replicator {harness.HOST}/32 scram-sha-256
    - host all all {harness.HOST}/32 scram-sha-256
"""

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 90) -> None:
        try:
            self._start_etcd()
            # The first node bootstraps (initdb) alone; the others then take a base backup.
            self.nodes[0].start()
            self.wait_for(lambda m: any(x["role"] == "leader" and x["state"] == "running"
                                        for x in m), timeout)
            leader = self.nodes[0]
            leader.psql("SET password_encryption = 'scram-sha-256'; "
                        "CREATE ROLE app LOGIN PASSWORD 'app'")
            leader.psql("CREATE DATABASE app OWNER app")
            leader.psql("CREATE TABLE acks (writer int, n int, port int, "
                        "PRIMARY KEY (writer, n)); GRANT ALL ON acks TO app", db="app")
            for node in self.nodes[1:]:
                node.start()
            self.wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise

    def _start_etcd(self) -> None:
        data = os.path.join(self.dir, "etcd")
        peer = f"http://{harness.HOST}:{self.etcd_peer_port}"
        client = f"http://{harness.HOST}:{self.etcd_port}"
        log = open(self.etcd_log, "ab")
        try:
            self.etcd_proc = subprocess.Popen(
                ["etcd", "--name", "etcd1", "--data-dir", data,
                 "--listen-client-urls", client, "--advertise-client-urls", client,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", f"etcd1={peer}", "--initial-cluster-state", "new",
                 "--listen-metrics-urls", "", "--logger", "zap"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=harness.clean_env())
        finally:
            log.close()
        harness.wait_for_port(self.etcd_port, self.etcd_proc, 30, self.etcd_log)

    def stop(self) -> None:
        for node in self.nodes:
            try:
                node.stop()
            except Exception:  # noqa: BLE001 - the others still go
                pass
        if self.etcd_proc is not None and self.etcd_proc.poll() is None:
            self.etcd_proc.send_signal(signal.SIGTERM)
            try:
                self.etcd_proc.wait(15)
            except subprocess.TimeoutExpired:
                self.etcd_proc.kill()
                self.etcd_proc.wait()
        self.etcd_proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- state --------------------------------------------------------------------------------

    def members(self) -> list[dict]:
        """Patroni's view (GET /cluster of any node that answers): name, role (leader,
        sync_standby, replica), state, port, lag, timeline."""
        for node in self.nodes:
            try:
                with urllib.request.urlopen(
                        f"http://{harness.HOST}:{node.rest_port}/cluster", timeout=2) as r:
                    return json.loads(r.read())["members"]
            except OSError:
                continue
        return []

    def wait_for(self, predicate, timeout: float):
        got = harness.wait_until(lambda: predicate(self.members()), timeout, 0.1)
        assert got, f"Patroni cluster not as expected after {timeout} s: {self.members()}\n" \
                    + self.logs()
        return got

    def wait_healthy(self, timeout: float = 60) -> None:
        """A running leader, a synchronous standby and every other member a running replica
        with no lag."""
        n = len(self.nodes)

        def healthy(m: list[dict]) -> bool:
            roles = sorted(x["role"] for x in m if x.get("state") in ("running", "streaming"))
            lags_ok = all(x.get("lag", 0) in (0, None) for x in m if x["role"] != "leader")
            return len(m) == n and roles.count("leader") == 1 \
                and roles.count("sync_standby") == 1 and len(roles) == n and lags_ok
        self.wait_for(healthy, timeout)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def leader(self) -> Node:
        return self.node(next(x["name"] for x in self.members() if x["role"] == "leader"))

    def with_role(self, role: str) -> list[Node]:
        return [self.node(x["name"]) for x in self.members() if x["role"] == role]

    def patronictl(self, *args: str, timeout: float = 90) -> str:
        rc, out, err = harness.run(["patronictl", "-c", self.nodes[0].config, *args],
                                   env=harness.clean_env(HOME=self.dir), timeout=timeout)
        if rc != 0:
            raise RuntimeError(f"patronictl {' '.join(args)} failed ({rc}):\n{out}\n{err}")
        return out

    def logs(self, lines: int = 30) -> str:
        return "".join(f"---- {n.name} ----\n{harness.tail(n.log_path, lines)}"
                       for n in self.nodes)
