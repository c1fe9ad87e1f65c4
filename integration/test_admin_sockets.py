"""The console's view of connections as PgBouncer 1.25 gives it (issue 19): clients and servers
numbered from one id sequence, SHOW SOCKETS and SHOW ACTIVE_SOCKETS (every connection, with
PgBouncer's buffer columns), and SHOW DNS_HOSTS / DNS_ZONES, empty because pgsluice keeps no DNS
cache (docs/admin.md)."""

from __future__ import annotations

import harness
from test_admin import ADMIN, Admin, reference_columns

BUFFER_COLUMNS = ["recv_pos", "pkt_pos", "pkt_remain", "send_pos", "send_remain", "pkt_avail",
                  "send_avail"]


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


def test_show_sockets_lists_clients_servers_and_logins(make_pooler):
    pooler = make_pooler(default_pool_size=2, **ADMIN)
    linked = pooler.raw(params={"application_name": "linked"})
    linked.query("BEGIN")  # holds its server: sv_active, linked to this client
    # A client that sent its StartupMessage and not the password: PgBouncer's login list.
    login = harness.socket.create_connection((harness.HOST, pooler.port))
    body = harness.struct.pack("!i", 196608) + b"user\0app\0database\0app\0\0"
    login.sendall(harness.struct.pack("!i", len(body) + 4) + body)
    assert login.recv(1) == b"R"  # asked for the password; it never comes
    admin = Admin(pooler)
    try:
        cols, _, tag = admin.run("SHOW SOCKETS")
        assert cols == reference_columns()["SOCKETS"] and tag == "SHOW"
        rows = admin.dicts("SHOW SOCKETS")
        by_state = {}
        for r in rows:
            by_state.setdefault(r["state"], []).append(r)
        # The console itself, the linked client, and the login after every logged-in socket.
        assert sorted(r["application_name"] for r in by_state["cl_active"]) == ["", "linked"]
        cl = next(r for r in by_state["cl_active"] if r["application_name"] == "linked")
        [sv] = by_state["sv_active"]
        assert sv["type"] == "S" and sv["link"] == cl["ptr"] and cl["link"] == sv["ptr"]
        assert int(sv["remote_pid"]) > 0 and int(sv["id"]) == int(cl["id"]) + 1
        [lg] = by_state["cl_login"]
        assert rows[-1] == lg and lg["type"] == "C" and lg["user"] == "app"
        assert set(by_state) == {"cl_active", "sv_active", "cl_login"}, rows
        # Nothing buffered between commands: every buffer column 0 (the console is reading
        # this very command).
        for r in rows:
            if r["database"] == "pgsluice":
                continue
            assert all(r[c] == "0" for c in BUFFER_COLUMNS), r
        # SHOW CLIENTS still leaves the login out, as PgBouncer.
        assert len([r for r in admin.dicts("SHOW CLIENTS") if r["database"] == "app"]) == 1
    finally:
        admin.close()
        login.close()
        linked.close()


def test_active_sockets_are_those_with_bytes_in_a_buffer(make_pooler):
    pooler = make_pooler(**ADMIN)
    client = pooler.raw(params={"application_name": "partial"})
    client.query("SELECT 1")
    admin = Admin(pooler)
    try:
        cols, rows, _ = admin.run("SHOW ACTIVE_SOCKETS")
        assert cols == reference_columns()["ACTIVE_SOCKETS"] and rows == []
        # Three bytes of a Query's five-byte header: received, kept until the rest comes.
        client.sendall(b"Q\0\0")

        def partial_rows():
            return [r for r in admin.dicts("SHOW ACTIVE_SOCKETS")
                    if r["application_name"] == "partial"]

        rows = harness.wait_until(partial_rows, 5)
        assert len(rows) == 1, admin.dicts("SHOW SOCKETS")
        assert rows[0]["state"] == "cl_active" and rows[0]["pkt_avail"] == "3"
        assert rows[0]["recv_pos"] == "3" and rows[0]["send_avail"] == "0"
        client.sendall(b"\0\x0dSELECT 1\0")  # the rest: length 13, then the query
        assert client.read_result()[0] == [["1"]]
        assert harness.wait_until(lambda: not partial_rows(), 5)
    finally:
        admin.close()
        client.close()


def test_dns_hosts_and_zones_have_pgbouncers_columns_and_no_rows(make_pooler):
    # pgsluice resolves each server's host when it connects (getaddrinfo), without a cache of
    # its own: no name or zone is ever cached, so both lists are empty.
    pooler = make_pooler(**ADMIN)
    with pooler.raw() as c:
        c.query("SELECT 1")
    admin = Admin(pooler)
    try:
        for command in ("DNS_HOSTS", "DNS_ZONES"):
            cols, rows, tag = admin.run(f"SHOW {command}")
            assert cols == reference_columns()[command] and rows == [] and tag == "SHOW"
    finally:
        admin.close()
