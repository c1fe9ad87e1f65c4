"""Online restart, `pgsluice -R` (PgBouncer's --reboot; docs/operations.md, "Online restart"):
the new process logs in to the running one's console over its Unix socket, takes its listening
sockets and its clients that are between transactions with no server (SHOW FDS, the descriptors
passed with SCM_RIGHTS), and the old one exits once the clients it kept have left.

- a client idle at the restart keeps its connection: its next query runs through the new
  process, on a server the new process logged in with the SCRAM keys the client proved to the
  old one (the auth_file holds only the verifier), and its cancel key still cancels;
- a client in a transaction at the restart finishes it on the old process, which exits (0)
  when it has left; new connections meanwhile reach the new process;
- with nothing running on the Unix socket, -R starts normally, as PgBouncer's does;
- SHOW FDS is refused to anyone but the pooler's own OS user over the Unix socket, and to
  that user's sessions other than a takeover's (a psql would take the listeners away).
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

import harness


def scram_pooler(pg, make_pooler, **kw):
    # Only the verifier in the auth_file and no password in [databases]: the pool logs in with
    # the keys a client proved (SCRAM pass-through), which must move with the client.
    return make_pooler(users={"app": pg.scram_verifier("app")}, unix_socket_dir="{dir}",
                       log_connections=1, **kw)


def reboot(old: harness.Pooler) -> harness.Pooler:
    """Starts `pgsluice -R` on the old process's configuration (same port, same Unix socket)."""
    new = harness.Pooler(old.pg, old.config_text, args=["-R"], start=False)
    new.port = old.port
    new.start()  # the port answers at once (the old process): wait for the takeover's end
    assert new.wait_for_log(r"pgsluice \S+ started", 15), new.log()
    return new


def test_idle_client_moves_to_the_new_process_with_its_scram_keys_and_cancel_key(pg, make_pooler):
    old = scram_pooler(pg, make_pooler, pool_mode="transaction", server_lifetime=1)
    idle = old.connect(autocommit=True)
    assert idle.execute("SELECT 1").fetchone() == (1,)
    busy = old.connect()
    busy.execute("SELECT 1")
    # busy is in a transaction now: it stays on the old process until it has left.
    time.sleep(1.5)  # server_lifetime: the servers the old process opened are gone
    new = reboot(old)
    try:
        assert "online restart: took over 1 clients" in new.log(), new.log()
        # The idle client goes on through the new process, whose server logs in with the moved
        # SCRAM keys (the verifier alone could not).
        assert idle.execute("SELECT 2").fetchone() == (2,)
        assert "taken over" in new.log(), new.log()
        assert "login ok, protocol" in new.log(), new.log()
        # New connections reach the new process while the old one still serves `busy`.
        fresh = old.connect(autocommit=True)
        assert fresh.execute("SELECT 3").fetchone() == (3,)
        fresh.close()
        assert old.alive()
        assert busy.execute("SELECT 4").fetchone() == (4,)
        busy.commit()
        busy.close()
        # Its last client gone, the old process exits by itself, cleanly.
        assert old.proc.wait(15) == 0
        old.proc = None
        # The cancel key the old process gave still cancels the idle client's query.
        errors = []

        def sleeper():
            try:
                idle.execute("SELECT pg_sleep(20)")
            except psycopg.errors.QueryCanceled as e:
                errors.append(e)

        t = threading.Thread(target=sleeper)
        start = time.monotonic()
        t.start()
        time.sleep(1)
        idle.cancel()
        t.join(15)
        assert errors and time.monotonic() - start < 10, errors
        assert idle.execute("SELECT 5").fetchone() == (5,)
        idle.close()
    finally:
        new.stop()


def test_reboot_with_nothing_running_starts_normally(pg, make_pooler):
    p = scram_pooler(pg, make_pooler, start=False)
    p.args = ["-R"]
    p.start()
    assert p.wait_for_log(r"pgsluice \S+ started", 15), p.log()
    conn = p.connect(autocommit=True)
    assert conn.execute("SELECT 1").fetchone() == (1,)
    conn.close()
    assert "online restart: no process on" in p.log(), p.log()


def test_show_fds_is_for_the_pooler_own_user_over_the_unix_socket_only(pg, make_pooler):
    p = make_pooler(admin_users="app", unix_socket_dir="{dir}")
    rc, out, err = p.psql("SHOW FDS", db="pgbouncer")
    assert rc != 0 and "only the pooler's own OS user over the Unix socket" in err, (out, err)
    assert p.alive()  # nothing was passed: the process goes on serving
    # The own user over the Unix socket, but not a takeover (a psql by mistake): refused too,
    # the listeners stay.
    rc, out, err = harness.run(["psql", "-X", "-At", "-h", p.dir, "-p", str(p.port), "-U",
                                "pgbouncer", "-d", "pgbouncer", "-c", "SHOW FDS"])
    assert rc != 0 and "only pgsluice -R runs it" in err, (out, err)
    rc, out, err = p.psql("SELECT 1")
    assert rc == 0 and out.strip() == "1", err


if __name__ == "__main__":
    pytest.main([__file__])
