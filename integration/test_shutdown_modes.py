"""SUSPEND and RESUME as PgBouncer 1.25 behaves, with real clients (psycopg, the raw protocol
client): during SUSPEND new connections wait instead of being refused."""
from __future__ import annotations

import threading
import time

ADMIN = {"admin_users": "app"}


def test_suspend_holds_new_connections_until_resume(make_pooler):
    """PgBouncer keeps its listening sockets during SUSPEND: a client connecting then waits for
    RESUME and is served, instead of being refused (PgBouncer's test_suspend_resume)."""
    pooler = make_pooler(**ADMIN)
    with pooler.connect(autocommit=True) as warm:  # the pool has a server
        assert warm.execute("SELECT 1").fetchone() == (1,)
    admin = pooler.raw(db="pgsluice")
    admin.query("SUSPEND")
    results: list = []

    def client() -> None:
        try:
            with pooler.connect(autocommit=True) as conn:
                results.append(conn.execute("SELECT 42").fetchone()[0])
        except Exception as e:  # noqa: BLE001 - reported below
            results.append(e)

    thread = threading.Thread(target=client)
    thread.start()
    time.sleep(1.0)
    assert results == [], results  # neither refused nor served while suspended
    admin.query("RESUME")
    thread.join(10)
    assert results == [42], results
    admin.close()
