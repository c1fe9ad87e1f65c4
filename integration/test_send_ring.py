"""io_uring for a loop turn's sends (issue 17; pooler/net/send_ring.h): each worker opens its own
ring at startup and submits the turn's sends through it, io_uring = 0 keeps one send() each, and
the startup log says which. The rest of the suite runs with the ring (the default) wherever the
kernel allows one; this file checks that the ring is really the path the sends take, by the
ring's own submission counter in /proc/PID/fdinfo, and that the setting switches it off."""

from __future__ import annotations

import ctypes
import os
import re

import pytest

import harness

SYS_IO_URING_SETUP = 425  # x86-64 and arm64 alike


def kernel_allows_io_uring() -> bool:
    """io_uring_setup(2) of a one-entry ring, as pgsluice's open does (a refusal: ENOSYS, EPERM)."""
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = libc.syscall(SYS_IO_URING_SETUP, 1, params)
    if fd < 0:
        return False
    os.close(fd)
    return True


def rings_of(pid: int) -> dict[str, int]:
    """The process's io_uring descriptors and each one's submitted entries (SqHead)."""
    rings = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if target == "anon_inode:[io_uring]":
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                m = re.search(r"^SqHead:\s*(\d+)", f.read(), re.M)
            rings[fd] = int(m.group(1)) if m else -1
    return rings


def run_pgbench(p: harness.Pooler) -> None:
    rc, out, err = p.pgbench(["-n", "-S", "-c", "8", "-j", "2", "-t", "250"], timeout=120)
    assert rc == 0, out + err
    assert "number of transactions actually processed: 2000/2000" in out, out
    assert "number of failed transactions: 0" in out, out


@pytest.mark.skipif(not kernel_allows_io_uring(), reason="this kernel refuses io_uring")
def test_each_worker_submits_the_turns_sends_through_its_ring(pgbench_data, make_pooler):
    p = make_pooler(workers="2")
    assert p.wait_for_log(r"a loop turn's sends: one io_uring submission"), p.log()
    before = rings_of(p.proc.pid)
    assert len(before) == 2, before  # one per worker
    run_pgbench(p)
    after = rings_of(p.proc.pid)
    # A transaction's two sends (the query to the server, the reply to the client) are
    # submitted through the rings, a turn's sends in one submission: at least one entry per
    # transaction whatever the batching, and none of them went by send() (strace would show it;
    # the counter is the ring's own).
    submitted = sum(after[fd] - before[fd] for fd in after)
    assert submitted >= 2000, (before, after)


def test_io_uring_0_sends_one_by_one(pgbench_data, make_pooler):
    p = make_pooler(workers="2", io_uring="0")
    assert p.wait_for_log(r"a loop turn's sends: one send\(\) each \(io_uring = 0\)"), p.log()
    assert rings_of(p.proc.pid) == {}
    run_pgbench(p)
    assert rings_of(p.proc.pid) == {}
