"""The container image and the compose stand (docker/), built and started as docker/README.md
says: the base image debian:12-slim made from Debian's packages when it is missing (no image
registry is reachable here), `docker build -f docker/Dockerfile -t pgsluice .`, then the workshop
stand of docker/compose.yaml under a project name of its own; psql and pgbench run in the client
container through the pgsluice container, whose health check must report healthy. The stand's
containers and network are removed at the end; the images are kept, so that the next run reuses
their layers (a cold build compiles pgsluice: minutes).

Skipped, saying why, where no container engine can run (no docker CLI or compose, no dockerd,
or a dockerd that does not start) and in the sanitizer pass (the image compiles its own Release
pgsluice, so that pass would build the same image again and test nothing sanitized)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
COMPOSE_FILE = os.path.join(REPO, "docker", "compose.yaml")
BASE_IMAGE = "debian:12-slim"
# Not the stand's own name (pgsluice-workshop, docker/.env): a stand a person has up is left alone.
PROJECT = f"pgsluice-test-{os.getpid()}"
APP_DSN = "host=pgsluice port=6432 dbname=app user=app password=app"
CONSOLE_DSN = "host=pgsluice port=6432 dbname=pgsluice user=app password=app"


# The image's pgsluice: by default the binary this suite tests (PGSLUICE_BIN), stripped into
# docker/prebuilt/ and taken by the Dockerfile's PGSLUICE_PREBUILT path, because compiling it
# again inside the image is most of a cold build (7 of 9.5 minutes here) and CI has just built
# it; PGSLUICE_CONTAINER_BUILD=source compiles in the image as docker/README.md's command does.
# test_dockerfile_sources_configure keeps the compiling path honest on every run.
FROM_SOURCE = os.environ.get("PGSLUICE_CONTAINER_BUILD") == "source"
PREBUILT = os.path.join(REPO, "docker", "prebuilt", "pgsluice")
BUILD_ENV = {} if FROM_SOURCE else {"PGSLUICE_PREBUILT": "1"}


def sh(cmd: list[str], timeout: float, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout, env=harness.clean_env(**BUILD_ENV))
    if check:
        assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-6000:]}"
    return p


def engine_answers() -> bool:
    try:
        return sh(["docker", "info"], 30, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def compose_command() -> list[str] | None:
    # Debian 12's docker-compose (1.29, what scripts/install-deps installs) first, as documented;
    # Compose 2 as a docker CLI plugin otherwise.
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if subprocess.run(["docker", "compose", "version"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode == 0:
        return ["docker", "compose"]
    return None


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """A running Docker engine: the one already running, else a dockerd started here (and
    stopped by its PID at the end), as a machine without a service manager needs."""
    if os.environ.get("PGSLUICE_SANITIZE") == "ON":
        pytest.skip("sanitizer pass: the image compiles its own Release pgsluice, so this pass "
                    "would rebuild the same image and check nothing sanitized; the normal pass "
                    "runs this test")
    if shutil.which("docker") is None:
        pytest.skip("no container engine: no docker CLI (scripts/install-deps installs docker.io)")
    compose = compose_command()
    if compose is None:
        pytest.skip("no docker-compose and no `docker compose` (scripts/install-deps installs "
                    "docker-compose)")
    if engine_answers():
        yield compose
        return
    dockerd = shutil.which("dockerd") or shutil.which("dockerd", path="/usr/sbin:/usr/bin")
    if dockerd is None:
        pytest.skip("no container engine: `docker info` fails and there is no dockerd to start "
                    "(scripts/install-deps installs docker.io)")
    if not harness.is_root():
        pytest.skip("no container engine: `docker info` fails and starting dockerd needs root")
    log_path = str(tmp_path_factory.mktemp("dockerd") / "dockerd.log")
    log = open(log_path, "wb")
    proc = subprocess.Popen([dockerd], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while not engine_answers():
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(30)
            log.close()
            pytest.skip(f"no container engine: dockerd did not start (exit {proc.returncode}); "
                        f"the end of its log:\n{harness.tail(log_path, 15)}")
        time.sleep(0.5)
    try:
        yield compose
    finally:
        proc.terminate()  # SIGTERM: dockerd stops its containerd and exits
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def image(engine):
    """The pgsluice image, built with docker/README.md's command on a base image made from
    Debian's packages when there is none."""
    if sh(["docker", "image", "inspect", BASE_IMAGE], 60, check=False).returncode != 0:
        if shutil.which("mmdebstrap") is None:
            pytest.skip(f"no {BASE_IMAGE} image and no mmdebstrap to make one "
                        "(scripts/install-deps installs mmdebstrap)")
        with tempfile.TemporaryDirectory() as d:
            rootfs = os.path.join(d, "rootfs.tar")
            sh(["mmdebstrap", "--variant=minbase", "bookworm", rootfs], 900)
            sh(["docker", "import", rootfs, BASE_IMAGE], 300)
    build = ["docker", "build", "-f", "docker/Dockerfile", "-t", "pgsluice"]
    if not FROM_SOURCE:
        sh(["strip", "-o", PREBUILT, harness.pgsluice_bin()], 60)
        build += ["--build-arg", "PGSLUICE_PREBUILT=1"]
    start = time.monotonic()
    try:
        sh(build + ["."], 1800)
        print(f"docker build ({'compiled' if FROM_SOURCE else 'prebuilt'}): "
              f"{time.monotonic() - start:.0f} s")
        yield "pgsluice"
    finally:
        if os.path.exists(PREBUILT):
            os.unlink(PREBUILT)  # the stand's compose build below has taken it by then


@pytest.fixture(scope="module")
def stand(engine, image):
    compose = engine + ["-f", COMPOSE_FILE, "-p", PROJECT]
    label = f"label=com.docker.compose.project={PROJECT}"
    try:
        # up waits for the postgres and pgsluice health checks before it starts the client
        # (depends_on: service_healthy); the stand's images share the layers just built.
        start = time.monotonic()
        up = sh(compose + ["up", "-d", "--build"], 900, check=False)
        if up.returncode != 0:
            logs = sh(compose + ["logs", "--tail", "40"], 120, check=False).stdout
            pytest.fail(f"compose up exited {up.returncode}:\n{up.stdout[-4000:]}\n{logs}")
        print(f"compose up: {time.monotonic() - start:.0f} s")
        yield compose
    finally:
        sh(compose + ["down", "-v", "--remove-orphans"], 300, check=False)
    left = [sh(["docker", kind, "ls", "-aq" if kind == "container" else "-q", "--filter", label],
               60).stdout.split() for kind in ("container", "network")]
    assert left == [[], []], f"containers and networks of {PROJECT} left after down: {left}"


def client(stand, *cmd: str, timeout: float = 120) -> str:
    return sh(stand + ["exec", "-T", "client", *cmd], timeout).stdout


def console(stand, command: str) -> list[dict[str, str]]:
    out = client(stand, "psql", "-X", "-A", "-F", "|", "-c", command, CONSOLE_DSN)
    lines = [line for line in out.splitlines() if line and not line.startswith("(")]
    header = lines[0].split("|")
    return [dict(zip(header, line.split("|"))) for line in lines[1:]]


def container_id(stand, service: str) -> str:
    cid = sh(stand + ["ps", "-q", service], 60).stdout.strip()
    assert cid, f"no {service} container"
    return cid


def test_psql_through_the_pgsluice_container(stand):
    # Through pgsluice to the stand's PostgreSQL, which runs with the stand's settings.
    out = client(stand, "psql", "-X", "-At", "-c",
                 "SELECT current_user, current_setting('max_connections'), "
                 "current_setting('shared_buffers')", APP_DSN)
    assert out.strip() == "app|1100|256MB"
    pools = console(stand, "SHOW POOLS")
    assert [(p["database"], p["user"], p["pool_mode"]) for p in pools
            if p["database"] == "app"] == [("app", "app", "transaction")]


def test_pgbench_through_the_pgsluice_container(stand):
    client(stand, "pgbench", "-q", "-i", "-s", "1", APP_DSN)
    before = {s["database"]: int(s["total_xact_count"]) for s in console(stand, "SHOW STATS")}
    out = client(stand, "pgbench", "-n", "-S", "-c", "8", "-j", "2", "-t", "250", APP_DSN)
    assert "number of transactions actually processed: 2000/2000" in out, out
    assert "number of failed transactions: 0 " in out, out
    after = {s["database"]: int(s["total_xact_count"]) for s in console(stand, "SHOW STATS")}
    # pgbench's transactions went through this pgsluice (the counters are its own).
    assert after["app"] - before.get("app", 0) >= 2000
    # Its startup log says how a loop turn's sends went: one io_uring submission, or one send()
    # each where the container's seccomp profile refuses io_uring (with the kernel's reason).
    logs = sh(stand + ["logs", "--no-color", "pgsluice"], 60).stdout
    sends = re.search(r"a loop turn's sends: (one io_uring submission|one send\(\) each \(.+\))",
                      logs)
    assert sends, logs[-3000:]
    print(sends.group(0))


def test_health_check_reports_healthy(stand):
    cid = container_id(stand, "pgsluice")
    status = sh(["docker", "inspect", "-f", "{{.State.Health.Status}}", cid], 60).stdout.strip()
    assert status == "healthy"
    # The same check with a wrong password fails: it does log in, and does not just look at a port.
    p = sh(["docker", "exec", "-e", "PGSLUICE_HEALTH_PASSWORD=wrong", cid,
            "/usr/local/bin/pgsluice-healthcheck"], 60, check=False)
    assert p.returncode != 0 and "password authentication failed" in p.stdout, p.stdout
    # The image runs pgsluice as its own non-root user.
    assert sh(["docker", "exec", cid, "id", "-un"], 60).stdout.strip() == "pgsluice"


def test_workshop_reports_name_the_stands_versions(stand):
    # A report made on the stand says which pgsluice and PgBouncer ran: the client container asks
    # their consoles, since their binaries are in other containers.
    out = client(stand, "python3", "-c",
                 "import json, sys; sys.path[:0] = ['integration', 'integration/workshop']; "
                 "import stand; print(json.dumps(stand.ExternalStand().versions()))")
    v = json.loads(out.strip().splitlines()[-1])
    assert v["pgsluice"].startswith("pgsluice "), v
    assert v["pgbouncer"].startswith("PgBouncer "), v
    assert v["postgresql"].startswith("PostgreSQL 15") and "shared_buffers=256MB" in v["pg_settings"]


def build_stage_sources() -> list[str]:
    """The repository paths the Dockerfile's compiling stage copies (its COPY lines)."""
    with open(os.path.join(REPO, "docker", "Dockerfile")) as f:
        lines = f.read().splitlines()
    start = lines.index("FROM debian:12-slim AS build")
    sources = []
    for line in lines[start + 1:]:
        if line.startswith("FROM "):
            break
        if line.startswith("COPY ") and "--from" not in line:
            sources += line.split()[1:-1]
    return sources


def test_dockerfile_sources_configure(tmp_path):
    # What the image compiles from, alone: its CMake configure must pass with tests off, as in the
    # Dockerfile (a folder CMakeLists.txt adds but the Dockerfile does not copy broke the image
    # once). Needs no container engine, so it runs wherever the suite runs, also when the image
    # takes the prebuilt binary.
    sources = build_stage_sources()
    assert "pooler" in sources and "protocol" in sources, sources
    src = tmp_path / "src"
    for path in sources:
        origin = os.path.join(REPO, path)
        if os.path.isdir(origin):
            shutil.copytree(origin, src / path, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            os.makedirs(src / os.path.dirname(path), exist_ok=True)
            shutil.copy(origin, src / path)
    p = sh(["cmake", "-S", str(src), "-B", str(tmp_path / "build"), "-DCMAKE_BUILD_TYPE=Release",
            "-DPGSLUICE_TESTS=OFF"], 300, check=False)
    assert p.returncode == 0, f"the Dockerfile's sources do not configure:\n{p.stdout[-4000:]}"
