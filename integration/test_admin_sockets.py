"""The console's view of connections as PgBouncer 1.25 gives it (issue 19): clients and servers
numbered from one id sequence, SHOW SOCKETS and SHOW ACTIVE_SOCKETS (every connection, with
PgBouncer's buffer columns), and SHOW DNS_HOSTS / DNS_ZONES, empty because pgsluice keeps no DNS
cache (docs/admin.md)."""

from __future__ import annotations

import harness
from test_admin import ADMIN, Admin


def app_ids(admin: Admin, command: str) -> set[int]:
    return {int(r["id"]) for r in admin.dicts(command) if r["database"] == "app"}


def test_clients_and_servers_share_one_id_sequence(make_pooler):
    # server_lifetime = 0: each server serves one client and closes, so each round opens one
    # client and one server, which take the next two ids, whichever worker they land on.
    pooler = make_pooler(pool_mode="session", server_lifetime=0, **ADMIN)
    admin = Admin(pooler)
    try:
        console_id = max(int(r["id"]) for r in admin.dicts("SHOW CLIENTS"))
        for i in range(1, 4):
            client = pooler.raw()
            client.query("SELECT 1")
            assert app_ids(admin, "SHOW CLIENTS") == {console_id + 2 * i - 1}
            assert app_ids(admin, "SHOW SERVERS") == {console_id + 2 * i}
            client.close()
            assert harness.wait_until(lambda: not app_ids(admin, "SHOW SERVERS"), 5), \
                admin.dicts("SHOW SERVERS")
            assert harness.wait_until(lambda: not app_ids(admin, "SHOW CLIENTS"), 5)
    finally:
        admin.close()
