"""pytest fixtures for the integration tests: one PostgreSQL cluster per pytest process (each
test_*.py file is its own CTest test, so one cluster per file), and poolers started per test or
per module in front of it."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402

harness.raise_nofile()


@pytest.fixture(scope="session")
def pg():
    cluster = harness.PostgresCluster()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def pgbench_data(pg):
    """The pgbench tables (scale 1) in database app, owned by app."""
    pg.pgbench_init()
    return pg


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def make_pooler(pg, request):
    """Factory: make_pooler(config=None, **kwargs) -> a started harness.Pooler, stopped (and
    checked: clean exit, no sanitizer report) at the end of the test. Its log is printed when
    the test failed."""
    poolers: list[harness.Pooler] = []

    def factory(config: str | None = None, **kwargs) -> harness.Pooler:
        p = harness.Pooler(pg, config, **kwargs)
        poolers.append(p)
        return p

    yield factory
    errors = []
    for p in poolers:
        try:
            p.stop()
        except AssertionError as e:
            errors.append(str(e))
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for p in poolers:
            print(f"---- pooler log (port {p.port}) ----\n{p.log()[-8000:]}")
    if errors:
        pytest.fail("\n".join(errors))
