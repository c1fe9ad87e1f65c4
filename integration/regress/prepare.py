"""The regression suite's files, fetched and built once per PostgreSQL 15 version and cached.

What is cached, in CACHE/<version>/ (CACHE: --cache, PGSLUICE_REGRESS_CACHE, or
/var/cache/pgsluice-regress as root, ~/.cache/pgsluice-regress otherwise):

  regress/   src/test/regress of Debian's postgresql-15 source package at the installed server's
             version: sql/, expected/, data/, parallel_schedule, resultmap (pg_regress --inputdir)
  lib/       regress.so (src/test/regress/regress.c), refint.so (contrib/spi/refint.c, with
             -DREFINT_VERBOSE as PostgreSQL's own build), autoinc.so (contrib/spi/autoinc.c),
             built against the installed server headers (pg_config --includedir-server);
             pg_regress --dlpath, which the tests read as PG_LIBDIR
  READY      written last: the cache is complete

To make it, with root (or sudo): postgresql-server-dev-15 is installed when its headers are
missing (at the server's version when Debian still has it); `apt-get source postgresql-15` needs
deb-src entries, which are added as /etc/apt/sources.list.d/pgsluice-deb-src.sources (the deb
entries' archives, as deb-src) when apt has none, followed by `apt-get update`. The unpacked
source tree is removed once the files above are copied out.
"""

from __future__ import annotations

import fcntl
import glob
import os
import re
import shutil
import subprocess
import tempfile

PG_MAJOR = "15"
SERVER_PACKAGE = f"postgresql-{PG_MAJOR}"
HEADERS_PACKAGE = f"postgresql-server-dev-{PG_MAJOR}"
PG_BIN = f"/usr/lib/postgresql/{PG_MAJOR}/bin"
PG_CONFIG = f"/usr/lib/postgresql/{PG_MAJOR}/bin/pg_config"
PG_REGRESS = f"/usr/lib/postgresql/{PG_MAJOR}/lib/pgxs/src/test/regress/pg_regress"
DEB_SRC_FILE = "/etc/apt/sources.list.d/pgsluice-deb-src.sources"
REGRESS_ITEMS = ["sql", "expected", "data", "parallel_schedule", "resultmap"]
# name -> (source file in the tree, extra compiler flags)
LIBRARIES = {
    "regress": ("src/test/regress/regress.c", []),
    "refint": ("contrib/spi/refint.c", ["-DREFINT_VERBOSE"]),
    "autoinc": ("contrib/spi/autoinc.c", []),
}


class Unavailable(Exception):
    """The suite cannot be prepared on this machine: no network to Debian, no root, no
    PostgreSQL 15. The message says what is missing (the test skips with it)."""


class Suite:
    """A prepared suite: where pg_regress, its input directory and the libraries are."""

    def __init__(self, root: str, version: str):
        self.root = root
        self.version = version
        self.inputdir = os.path.join(root, "regress")
        self.dlpath = os.path.join(root, "lib")
        self.schedule = os.path.join(self.inputdir, "parallel_schedule")
        self.pg_regress = PG_REGRESS
        self.bindir = PG_BIN

    def schedule_groups(self) -> list[list[str]]:
        """parallel_schedule's `test:` lines, in order: each a list of test names."""
        groups = []
        with open(self.schedule) as f:
            for line in f:
                if line.startswith("test:"):
                    groups.append(line[len("test:"):].split())
        return groups

    def ignored_tests(self) -> set[str]:
        """The schedule's `ignore:` tests (pg_regress prints them `failed (ignored)`)."""
        with open(self.schedule) as f:
            return {t for line in f if line.startswith("ignore:") for t in line[7:].split()}


def log(msg: str) -> None:
    print(f"regress: {msg}", flush=True)


def _sudo() -> list[str]:
    return [] if os.geteuid() == 0 else ["sudo", "-n"]


def _run(cmd: list[str], cwd: str | None = None, timeout: float = 600) -> tuple[int, str]:
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    return p.returncode, p.stdout


def default_cache() -> str:
    if os.environ.get("PGSLUICE_REGRESS_CACHE"):
        return os.environ["PGSLUICE_REGRESS_CACHE"]
    if os.geteuid() == 0:
        return "/var/cache/pgsluice-regress"
    return os.path.join(os.path.expanduser("~"), ".cache", "pgsluice-regress")


def server_version() -> str:
    """The installed postgresql-15 package's version (15.18-0+deb12u1, say)."""
    rc, out = _run(["dpkg-query", "-W", "-f=${Version}", SERVER_PACKAGE])
    if rc != 0 or not out.strip():
        raise Unavailable(f"{SERVER_PACKAGE} is not installed (scripts/install-deps installs it)")
    return out.strip()


def prepare(cache: str | None = None) -> Suite:
    """The cached suite for the installed server, made first when missing. Raises Unavailable
    when it cannot be made here."""
    version = server_version()
    if not os.path.exists(PG_REGRESS):
        raise Unavailable(f"{PG_REGRESS} missing (package postgresql-client-{PG_MAJOR})")
    cache = cache or default_cache()
    root = os.path.join(cache, version)
    suite = Suite(root, version)
    if os.path.exists(os.path.join(root, "READY")):
        return suite
    os.makedirs(cache, exist_ok=True)
    os.chmod(cache, 0o755)
    with open(os.path.join(cache, f"{version}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second run waits for the first one's build
        if not os.path.exists(os.path.join(root, "READY")):
            _build(cache, root, version)
    return suite


def _build(cache: str, root: str, version: str) -> None:
    log(f"preparing the regression suite of PostgreSQL {version} in {root} (once)")
    include = _server_headers(version)
    work = tempfile.mkdtemp(prefix="work-", dir=cache)
    try:
        tree = _fetch_source(work, version)
        partial = os.path.join(work, "out")
        os.makedirs(os.path.join(partial, "regress"))
        os.makedirs(os.path.join(partial, "lib"))
        for item in REGRESS_ITEMS:
            src = os.path.join(tree, "src", "test", "regress", item)
            dst = os.path.join(partial, "regress", item)
            if os.path.isdir(src):
                shutil.copytree(src, dst)
            else:
                shutil.copy2(src, dst)
        for name, (source, flags) in LIBRARIES.items():
            _compile(os.path.join(tree, source), flags, include,
                     os.path.join(partial, "lib", name + ".so"))
        for dirpath, dirnames, filenames in os.walk(partial):  # the postgres user reads them
            os.chmod(dirpath, 0o755)
            for f in filenames:
                path = os.path.join(dirpath, f)
                os.chmod(path, 0o755 if f.endswith(".so") else 0o644)
        with open(os.path.join(partial, "READY"), "w") as f:
            f.write(f"{SERVER_PACKAGE} {version}: src/test/regress and {', '.join(LIBRARIES)}\n")
        shutil.rmtree(root, ignore_errors=True)
        os.rename(partial, root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"regression suite ready in {root}")


def _server_headers(version: str) -> str:
    """pg_config --includedir-server, installing postgresql-server-dev-15 first if needed."""
    def includedir() -> str | None:
        if not os.path.exists(PG_CONFIG):
            return None
        rc, out = _run([PG_CONFIG, "--includedir-server"])
        path = out.strip()
        return path if rc == 0 and os.path.exists(os.path.join(path, "postgres.h")) else None

    path = includedir()
    if path:
        return path
    log(f"installing {HEADERS_PACKAGE} (the server headers)")
    install = _sudo() + ["apt-get", "install", "-y", "--no-install-recommends"]
    for spec in (f"{HEADERS_PACKAGE}={version}", HEADERS_PACKAGE, "update"):
        if spec == "update":  # stale package lists: once more after an update
            _run(_sudo() + ["apt-get", "update"])
            spec = HEADERS_PACKAGE
        rc, out = _run(install + [spec])
        if rc == 0:
            break
        log(f"apt-get install {spec} failed:\n{out[-1500:]}")
    path = includedir()
    if not path:
        raise Unavailable(f"the PostgreSQL {PG_MAJOR} server headers are missing and "
                          f"{HEADERS_PACKAGE} could not be installed")
    return path


def _compile(source: str, flags: list[str], include: str, target: str) -> None:
    _, cflags = _run([PG_CONFIG, "--cflags"])
    _, cflags_sl = _run([PG_CONFIG, "--cflags_sl"])
    cmd = (["cc"] + cflags.split() + cflags_sl.split() + flags +
           ["-I", include, "-shared", "-o", target, source])
    rc, out = _run(cmd)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out}")


def _fetch_source(work: str, version: str) -> str:
    """`apt-get source` of postgresql-15 at `version` (else the newest apt knows), unpacked in
    `work`; returns the tree's path."""
    if not _apt_knows_source():
        _add_deb_src()
    for spec in (f"{SERVER_PACKAGE}={version}", SERVER_PACKAGE):
        rc, out = _run(["apt-get", "source", "--download-only", spec], cwd=work)
        if rc == 0:
            if spec == SERVER_PACKAGE:
                log(f"warning: Debian no longer has the source of {version}; using the newest "
                    "(some expected outputs may differ from the installed server's)")
            break
        log(f"apt-get source {spec} failed:\n{out[-1500:]}")
    else:
        raise Unavailable(f"apt-get source {SERVER_PACKAGE} failed (no network to Debian?)")
    dsc = glob.glob(os.path.join(work, f"{SERVER_PACKAGE}_*.dsc"))[0]
    tree = os.path.join(work, "src")
    rc, out = _run(["dpkg-source", "-x", dsc, tree], cwd=work)
    if rc != 0:
        raise RuntimeError(f"dpkg-source -x {dsc} failed:\n{out[-3000:]}")
    return tree


def _apt_knows_source() -> bool:
    rc, out = _run(["apt-cache", "showsrc", SERVER_PACKAGE])
    return rc == 0 and "Package:" in out


def _add_deb_src() -> None:
    """Adds deb-src entries for the archives apt's deb entries name, and runs apt-get update."""
    stanzas = _deb_src_stanzas()
    log(f"adding deb-src entries ({DEB_SRC_FILE}) and running apt-get update")
    text = "# written by pgsluice integration/regress (apt-get source postgresql-15)\n"
    text += "\n".join(stanzas)
    if os.geteuid() == 0:
        with open(DEB_SRC_FILE, "w") as f:
            f.write(text)
    else:
        p = subprocess.run(["sudo", "-n", "tee", DEB_SRC_FILE], input=text, text=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise Unavailable(f"cannot write {DEB_SRC_FILE} (needs root): {p.stderr.strip()}")
    rc, out = _run(_sudo() + ["apt-get", "update"])
    if rc != 0 or not _apt_knows_source():
        raise Unavailable(f"apt-get update with deb-src entries failed (no network to Debian?):"
                          f"\n{out[-1500:]}")


def _deb_src_stanzas() -> list[str]:
    """deb822 stanzas: each Debian `deb` entry of apt's sources (one-line and deb822 files) as
    deb-src; Debian's own archives when none is found."""
    codename = ""
    with open("/etc/os-release") as f:
        m = re.search(r"^VERSION_CODENAME=(\S+)", f.read(), re.M)
        codename = m.group(1) if m else "bookworm"
    entries: list[tuple[str, str, str, str]] = []  # (uri, suites, components, signed-by)
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                m = re.match(r"^\s*deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s+(.+)$", line)
                if m:
                    opts = dict(o.split("=", 1) for o in (m.group(1) or "").split() if "=" in o)
                    entries.append((m.group(2), m.group(3), m.group(4).split("#")[0].strip(),
                                    opts.get("signed-by", "")))
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        if path == DEB_SRC_FILE:
            continue
        with open(path) as f:
            for block in re.split(r"\n\s*\n", f.read()):
                fields = {}
                for line in block.splitlines():
                    m = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
                    if m:
                        fields[m.group(1).lower()] = m.group(2).strip()
                if "deb" in fields.get("types", "").split() and \
                        fields.get("enabled", "yes") != "no":
                    for uri in fields.get("uris", "").split():
                        entries.append((uri, fields.get("suites", ""),
                                        fields.get("components", ""),
                                        fields.get("signed-by", "")))
    stanzas = []
    for uri, suites, components, signed_by in entries:
        if not any(s.startswith(codename) for s in suites.split()):
            continue  # not Debian's archive for this release (nodesource, …)
        stanza = f"Types: deb-src\nURIs: {uri}\nSuites: {suites}\nComponents: {components}\n"
        if signed_by:
            stanza += f"Signed-By: {signed_by}\n"
        stanzas.append(stanza)
    if not stanzas:
        key = "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        stanzas = [f"Types: deb-src\nURIs: http://deb.debian.org/debian\n"
                   f"Suites: {codename} {codename}-updates\nComponents: main\n{key}",
                   f"Types: deb-src\nURIs: http://deb.debian.org/debian-security\n"
                   f"Suites: {codename}-security\nComponents: main\n{key}"]
    return stanzas
