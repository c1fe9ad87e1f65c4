"""Client authentication through pgsluice (trust, plain, md5, scram-sha-256), the server login
that follows (as the client's user with the auth_file password, as a configured user, or by
SCRAM pass-through), and the errors a client gets at login."""

from __future__ import annotations

import hashlib

import psycopg
import pytest

import harness

AUTH_TYPES = ["trust", "plain", "md5", "scram-sha-256"]
# Client users: name -> right password. The server authenticates them with scram, md5, scram
# and trust respectively (see harness.PostgresCluster's pg_hba.conf).
USERS = {"app": "app", "md5user": "md5pass", "scramuser": "scrampass", "trustuser": "trustpass"}


def md5_secret(user: str, password: str) -> str:
    return "md5" + hashlib.md5((password + user).encode()).hexdigest()


def login_error(pooler, user, password, db="app", **kwargs) -> harness.PgError:
    """Logs in with the raw client, expecting a FATAL; returns it."""
    with pytest.raises(harness.PgError) as info:
        c = pooler.raw(user=user, password=password, db=db, **kwargs)
        c.close()
    assert info.value.severity == "FATAL", info.value.fields
    return info.value


@pytest.fixture(scope="module", params=AUTH_TYPES)
def auth_pooler(pg, request):
    p = harness.Pooler(pg, auth_type=request.param, users=USERS, pool_mode="transaction",
                       default_pool_size=2)
    p.auth_type = request.param
    yield p
    p.stop()


@pytest.mark.parametrize("user", list(USERS))
def test_right_password_logs_in(auth_pooler, user):
    # libpq (psycopg)
    with auth_pooler.connect(user=user, password=USERS[user], autocommit=True) as conn:
        row = conn.execute("SELECT current_user, current_database(), %s::int",
                           (7,)).fetchone()
        assert row == (user, "app", 7)
    # The raw client: its own cleartext/md5/SCRAM answer to whatever the pooler asks.
    with auth_pooler.raw(user=user, password=USERS[user]) as c:
        assert c.scalar("SELECT current_user") == user
    # psql
    rc, out, err = auth_pooler.psql("SELECT current_user", user=user, password=USERS[user])
    assert rc == 0, err
    assert out.strip() == user


@pytest.mark.parametrize("user", list(USERS))
def test_wrong_password(auth_pooler, user):
    if auth_pooler.auth_type == "trust":
        # trust: no password is asked, so any password (or none) logs in.
        with auth_pooler.raw(user=user, password=None) as c:
            assert c.scalar("SELECT current_user") == user
        return
    err = login_error(auth_pooler, user, "not-" + USERS[user])
    assert err.sqlstate == "28P01", err.fields
    assert "password authentication failed" in err.message

    rc, out, stderr = auth_pooler.psql("SELECT 1", user=user, password="wrong")
    assert rc != 0
    assert "password authentication failed" in stderr

    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        auth_pooler.connect(user=user, password="wrong").close()


def test_unknown_user_refused(auth_pooler):
    if auth_pooler.auth_type == "trust":
        pytest.skip("trust")
    err = login_error(auth_pooler, "nosuchuser", "whatever")
    assert err.sqlstate in ("28P01", "28000"), err.fields


def test_unknown_database(auth_pooler):
    err = login_error(auth_pooler, "app", "app", db="nosuchdb")
    assert err.sqlstate == "3D000", err.fields
    assert "nosuchdb" in err.message
    # The pooler is still fine.
    with auth_pooler.raw() as c:
        assert c.scalar("SELECT 1") == "1"


def test_configured_server_user(make_pooler):
    """A [databases] entry with user= and password=: every client runs as that user."""
    pooler = make_pooler(auth_type="scram-sha-256", users=USERS, databases={
        "forced": "host=127.0.0.1 port={pg_port} dbname=app user=app password=app"})
    with pooler.connect(user="md5user", password="md5pass", db="forced",
                        autocommit=True) as conn:
        assert conn.execute("SELECT current_user, session_user").fetchone() == ("app", "app")
    err = login_error(pooler, "md5user", "wrong", db="forced")
    assert err.sqlstate == "28P01"


def test_md5_hash_in_auth_file(make_pooler):
    """auth_type md5 against an `md5…` auth_file entry (no plain password stored)."""
    pooler = make_pooler(auth_type="md5", users={"client1": md5_secret("client1", "s3cret")},
                         databases={"app": "host=127.0.0.1 port={pg_port} dbname=app "
                                           "user=app password=app"})
    with pooler.raw(user="client1", password="s3cret") as c:
        assert c.scalar("SELECT current_user") == "app"
    rc, out, err = pooler.psql("SELECT 'psql ok'", user="client1", password="s3cret")
    assert rc == 0, err
    assert out.strip() == "psql ok"
    assert login_error(pooler, "client1", "wrong").sqlstate == "28P01"


def test_scram_verifier_in_auth_file_for_client(pg, make_pooler):
    """auth_type scram-sha-256 against a `SCRAM-SHA-256$…` auth_file entry; the server login
    uses the configured user."""
    pooler = make_pooler(auth_type="scram-sha-256",
                         users={"md5user": pg.scram_verifier("app")},  # app's verifier: pw app
                         databases={"app": "host=127.0.0.1 port={pg_port} dbname=app "
                                           "user=md5user password=md5pass"})
    with pooler.connect(user="md5user", password="app", autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == "md5user"
    assert login_error(pooler, "md5user", "md5pass").sqlstate == "28P01"


@pytest.mark.parametrize("user,password", [("scramuser", "scrampass"), ("app", "app")])
def test_scram_pass_through(pg, make_pooler, user, password):
    """auth_file holds only the SCRAM verifier copied from pg_authid; the database entry has no
    user or password: the keys the client proves are reused to log in to the server."""
    verifier = pg.scram_verifier(user)
    assert verifier.startswith("SCRAM-SHA-256$")
    pooler = make_pooler(auth_type="scram-sha-256", users={user: verifier},
                         pool_mode="transaction", default_pool_size=2)
    for _ in range(3):  # new clients, and servers reused or opened anew
        with pooler.connect(user=user, password=password, autocommit=True) as conn:
            assert conn.execute("SELECT current_user").fetchone()[0] == user
    rc, out, err = pooler.psql("SELECT current_user", user=user, password=password)
    assert rc == 0, err
    assert out.strip() == user
    assert login_error(pooler, user, "wrong").sqlstate == "28P01"
