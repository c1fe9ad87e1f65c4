"""auth_dbname and auth_query settings that cannot work: an auth_dbname that is not configured,
the console as auth_dbname, a DISABLEd auth database, a query PostgreSQL refuses. The client is
told the pooler is misconfigured ('bouncer config error', PgBouncer's words) and nothing about
its user; the log says why, once per client."""

from __future__ import annotations

import pytest

import harness

APP = "host=127.0.0.1 port={pg_port} dbname=app"


def login_error(pooler, user="md5user", password="md5pass", db="app") -> harness.PgError:
    with pytest.raises(harness.PgError) as info:
        pooler.raw(user=user, password=password, db=db).close()
    assert info.value.severity == "FATAL", info.value.fields
    return info.value


def lookup_pooler(make_pooler, databases, **settings):
    """Only postgres (auth_user) and app (an admin) are in userlist.txt: md5user needs a lookup."""
    return make_pooler(auth_type="md5", users={"postgres": "postgres", "app": "app"},
                       auth_user="postgres", databases=databases, admin_users="app",
                       **settings)


def admin(pooler, command: str) -> None:
    rc, _, err = pooler.psql(command, db="pgsluice")
    assert rc == 0, err


def test_auth_dbname_not_configured(make_pooler):
    p = lookup_pooler(make_pooler, {"app": APP}, auth_dbname="nowhere")
    err = login_error(p)
    assert err.message == "bouncer config error", err.fields
    assert p.wait_for_log(r'authentication database "nowhere" is not configured'), p.log()
    # A database line's own auth_dbname comes before the global one.
    q = lookup_pooler(make_pooler, {"app": APP + " auth_dbname=authdb", "authdb": APP},
                      auth_dbname="nowhere")
    with q.raw(user="md5user", password="md5pass") as c:
        assert c.scalar("SELECT current_user") == "md5user"


def test_console_as_auth_dbname(make_pooler):
    reserved = 'cannot use the reserved "pgbouncer" database as an auth_dbname'
    p = lookup_pooler(make_pooler, {"app": APP + " auth_dbname=pgbouncer", "*": APP})
    assert login_error(p).message == "bouncer config error"
    # The console itself, asked for by a user only auth_query could know, with no auth_dbname.
    err = login_error(p, db="pgbouncer")
    assert err.message == "bouncer config error", err.fields
    assert p.log().count(reserved) == 2, p.log()
    # In the main section it is refused at load: RELOAD keeps the old configuration.
    with open(p.config_path, "a") as f:
        f.write("auth_dbname = pgbouncer\n")
    rc, _, err_text = p.psql("RELOAD", db="pgsluice")
    assert rc != 0 and "RELOAD failed" in err_text, err_text
    assert p.log().count(reserved) == 3, p.log()
    with p.raw() as c:  # app is in userlist.txt: no lookup
        assert c.scalar("SELECT 1") == "1"


def test_disabled_auth_dbname_stops_lookups(make_pooler):
    p = lookup_pooler(make_pooler, {"app": APP + " auth_dbname=authdb", "authdb": APP})
    with p.raw(user="md5user", password="md5pass") as c:
        assert c.scalar("SELECT 1") == "1"
    admin(p, "DISABLE authdb")
    admin(p, "RELOAD")  # drops the cached secret: the next login needs a lookup
    err = login_error(p)
    assert err.sqlstate == "57P03", err.fields
    assert err.message == 'authentication database "authdb" is disabled'
    admin(p, "ENABLE authdb")
    with p.raw(user="md5user", password="md5pass") as c:
        assert c.scalar("SELECT 1") == "1"


def test_auth_query_refused_by_postgres(make_pooler):
    p = lookup_pooler(make_pooler, {"app": APP},
                      auth_query="SELECT u, p FROM not_pg_shadow WHERE u = $1")
    err = login_error(p)
    assert err.message == "bouncer config error", err.fields
    assert p.wait_for_log(r'relation "not_pg_shadow" does not exist'), p.log()
