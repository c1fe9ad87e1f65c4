"""SIGHUP re-reads the configuration without dropping connections: a changed pool size applies
live, and a broken file keeps the old settings with an error in the log."""

from __future__ import annotations

import os
import signal
import time


def test_sighup_applies_a_new_pool_size_and_keeps_clients(make_pooler):
    pooler = make_pooler(default_pool_size=1, query_wait_timeout=2)
    keeper = pooler.connect(autocommit=True)
    assert keeper.execute("SELECT 1").fetchone()[0] == 1
    with open(pooler.config_path) as f:
        text = f.read()
    with open(pooler.config_path, "w") as f:
        f.write(text.replace("default_pool_size = 1", "default_pool_size = 3"))
    os.kill(pooler.proc.pid, signal.SIGHUP)
    assert pooler.wait_for_log(r"SIGHUP: configuration reloaded", 5), pooler.log()
    # Three transactions open at once now get three servers.
    conns = [pooler.connect() for _ in range(3)]
    try:
        pids = {c.execute("SELECT pg_backend_pid()").fetchone()[0] for c in conns}
    finally:
        for c in conns:
            c.rollback()
            c.close()
    assert len(pids) == 3
    # The client connected before the reload is still served.
    assert keeper.execute("SELECT 2").fetchone()[0] == 2
    keeper.close()


def test_sighup_with_a_broken_file_keeps_the_old_config(make_pooler):
    pooler = make_pooler(default_pool_size=2)
    with open(pooler.config_path, "a") as f:
        f.write("\nno_such_setting = 1\n")
    os.kill(pooler.proc.pid, signal.SIGHUP)
    assert pooler.wait_for_log(r"SIGHUP: reload failed, keeping the old configuration", 5), \
        pooler.log()
    assert "no_such_setting" in pooler.log()
    time.sleep(0.1)
    with pooler.connect(autocommit=True) as c:
        assert c.execute("SELECT 3").fetchone()[0] == 3
