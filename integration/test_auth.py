"""Client authentication through pgsluice (trust, plain, md5, scram-sha-256), the server login
that follows (as the client's user with the auth_file password, as a configured user, or by
SCRAM pass-through), and the errors a client gets at login."""

from __future__ import annotations

import hashlib
import threading
import time

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
    err = login_error(auth_pooler, "nosuchuser", "whatever")
    assert err.sqlstate in ("28P01", "28000"), err.fields
    if auth_pooler.auth_type == "trust":
        # As PgBouncer: trust asks for no password, but only users in auth_file get in.
        assert err.message == '"trust" authentication failed', err.fields
        assert auth_pooler.wait_for_log('no such user "nosuchuser"', 5)


def test_unknown_database(auth_pooler):
    err = login_error(auth_pooler, "app", "app", db="nosuchdb")
    assert err.sqlstate == "3D000", err.fields
    assert "nosuchdb" in err.message
    # Only after the authentication (PgBouncer's way): without the password, or as a user
    # nobody knows, a client cannot tell a missing database from a wrong password.
    if auth_pooler.auth_type != "trust":
        for user, password in (("app", "wrong"), ("nosuchuser", "whatever")):
            err = login_error(auth_pooler, user, password, db="nosuchdb")
            assert err.sqlstate == "28P01", err.fields
            assert err.message == f'password authentication failed for user "{user}"', err.fields
    else:
        err = login_error(auth_pooler, "nosuchuser", None, db="nosuchdb")
        assert err.message == '"trust" authentication failed', err.fields
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


# --- auth_query / auth_user ------------------------------------------------------------------


def auth_query_pooler(make_pooler, auth_type="md5", **settings):
    """Only auth_user (postgres, a superuser that may read pg_authid) is in userlist.txt: every
    other user's secret comes from auth_query (the default, PgBouncer's pg_authid query).
    The tests count lookups at the default worker count: the cache is the process's
    (pooler/core/auth_cache.h), so a user looked up through one worker is known on the other."""
    return make_pooler(auth_type=auth_type, users={"postgres": "postgres"}, auth_user="postgres",
                       pool_mode="transaction", default_pool_size=2, args=["-v"], **settings)


def lookups_of(pooler, user: str) -> int:
    return pooler.log().count(f'auth_query for user "{user}"')


def test_auth_query_md5_and_scram_users(pg, make_pooler):
    """md5user's secret is an MD5 hash (the server logs the pool in with it), scramuser's a SCRAM
    verifier (the client is asked for SCRAM even under auth_type md5, and its proof logs the pool
    in: SCRAM pass-through)."""
    p = auth_query_pooler(make_pooler)
    for user, password in (("md5user", "md5pass"), ("scramuser", "scrampass")):
        with p.raw(user=user, password=password) as c:
            assert c.scalar("SELECT current_user") == user
        rc, out, err = p.psql("SELECT current_user", user=user, password=password)
        assert rc == 0, err
        assert out.strip() == user
        with p.connect(user=user, password=password, autocommit=True) as conn:
            assert conn.execute("SELECT session_user").fetchone()[0] == user
    # Three logins each, one query each: the rest came from the cache.
    assert lookups_of(p, "md5user") == 1 and lookups_of(p, "scramuser") == 1, p.log()
    # Over SCRAM with auth_type scram-sha-256 too.
    s = auth_query_pooler(make_pooler, auth_type="scram-sha-256")
    with s.connect(user="app", password="app", autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == "app"


def test_trust_admits_users_auth_query_knows_and_no_one_else(pg, make_pooler):
    # PgBouncer's rule: under trust a user absent from auth_file is looked up with auth_query,
    # and gets in only if the query finds it. One it does not find gets PgBouncer's "no such
    # user" (its suite's test_auth_user_with_same_forced_user): trust asks for no password, so
    # any user that exists gets in and the answer hides nothing. A user missing from auth_file
    # with no auth_user keeps '"trust" authentication failed' (test_unknown_user_refused).
    p = auth_query_pooler(make_pooler, auth_type="trust")
    with p.raw(user="md5user", password=None) as c:
        assert c.scalar("SELECT current_user") == "md5user"
    err = login_error(p, "no_such_role", "nope")
    assert err.sqlstate == "28000" and err.message == "no such user", err.fields
    assert p.wait_for_log(r"C-\d+ no_such_role@app 127\.0\.0\.1:\d+ closing because: "
                          r"no such user \(age=\d+s\)", 5), p.log()


def test_auth_query_refusals_look_like_a_wrong_password(pg, make_pooler):
    p = auth_query_pooler(make_pooler)
    wrong = login_error(p, "scramuser", "nope")
    unknown = login_error(p, "no_such_role", "nope")
    no_password = login_error(p, "trustuser", "nope")  # NULL rolpassword
    for err, user in ((wrong, "scramuser"), (unknown, "no_such_role"), (no_password, "trustuser")):
        assert err.sqlstate == "28P01", err.fields
        assert err.message == f'password authentication failed for user "{user}"'
    md5_wrong = login_error(p, "md5user", "nope")
    assert md5_wrong.sqlstate == "28P01"
    # The right password still works after the failures.
    with p.raw(user="scramuser", password="scrampass") as c:
        assert c.scalar("SELECT 1") == "1"


def test_auth_query_sees_a_changed_password(pg, make_pooler):
    pg.psql("DROP ROLE IF EXISTS rotating; CREATE ROLE rotating LOGIN PASSWORD 'first'; "
            "GRANT ALL ON DATABASE app TO rotating")
    p = auth_query_pooler(make_pooler)
    with p.raw(user="rotating", password="first") as c:
        assert c.scalar("SELECT current_user") == "rotating"
    pg.psql("ALTER ROLE rotating PASSWORD 'second'")
    # The cached verifier is the old one: the first try fails and drops it, the next one asks
    # the server again.
    assert login_error(p, "rotating", "second").sqlstate == "28P01"
    with p.raw(user="rotating", password="second") as c:
        assert c.scalar("SELECT current_user") == "rotating"
    assert lookups_of(p, "rotating") == 2, p.log()


def test_auth_query_cache_ttl_zero_asks_every_time(pg, make_pooler):
    p = auth_query_pooler(make_pooler, auth_query_cache_ttl="0")
    for _ in range(3):
        with p.raw(user="md5user", password="md5pass") as c:
            assert c.scalar("SELECT 1") == "1"
    assert lookups_of(p, "md5user") == 3, p.log()


def test_auth_query_does_not_block_the_loop(pg, make_pooler):
    """A lookup that takes seconds holds only its own client: an auth_file user logs in and
    queries meanwhile."""
    slow = ("SELECT rolname, rolpassword FROM pg_authid, pg_sleep(4) "
            "WHERE rolname = $1 AND rolcanlogin")
    p = make_pooler(auth_type="md5", users={"postgres": "postgres", "app": "app"},
                    auth_user="postgres", auth_query=slow, args=["-v"])
    done = {}

    def slow_login():
        with p.raw(user="scramuser", password="scrampass", timeout=60) as c:
            c.scalar("SELECT 1")
        done["slow"] = time.monotonic()

    t = threading.Thread(target=slow_login)
    t.start()
    try:
        assert p.wait_for_log('auth_query for user "scramuser"', 20), p.log()
        with p.raw(user="app", password="app") as c:
            assert c.scalar("SELECT 42") == "42"
        done["fast"] = time.monotonic()
    finally:
        t.join(60)
    assert "slow" in done, p.log()
    assert done["fast"] < done["slow"]


def test_auth_query_failure_is_logged_and_refused(pg, make_pooler):
    """auth_user's lookup query cannot run (no such table): the client gets a FATAL that says
    nothing about the user, the log says why, and nothing is cached."""
    p = make_pooler(auth_type="md5", users={"postgres": "postgres"}, auth_user="postgres",
                    auth_query="SELECT u, p FROM no_such_table WHERE u = $1")
    for _ in range(2):
        err = login_error(p, "md5user", "md5pass")
        assert err.sqlstate == "08006", err.fields
        assert err.message == "bouncer config error", err.fields  # PgBouncer's words
    assert p.wait_for_log(r'auth_query failed: relation "no_such_table" does not exist')
    assert p.log().count("auth_query failed") == 2, p.log()


def test_server_secret_of_the_wrong_type(pg, make_pooler):
    """A forced server user whose only secret is a SCRAM verifier, with no client proof to reuse
    (trust): the server login cannot answer SCRAM, and the client hears PgBouncer's words."""
    pooler = make_pooler(auth_type="trust", users={"app": "app",
                                                   "scramuser": pg.scram_verifier("scramuser")},
                         databases={"forced": "host=127.0.0.1 port={pg_port} dbname=app "
                                              "user=scramuser"})
    err = login_error(pooler, "app", None, db="forced")
    assert err.message.startswith("server login failed: wrong password type: "), err.fields
    assert pooler.wait_for_log(r"server login failed: wrong password type: the server asks for "
                               r'SCRAM .* for user "scramuser"'), pooler.log()
