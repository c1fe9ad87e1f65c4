"""pg_regress's output read back, each pooled run compared with the direct one, and the summary.

pg_regress 15 prints one line per test (`%-28s` names, `ok    ` aligned with `FAILED`):
    test test_setup                   ... ok          512 ms
    parallel group (20 tests):  boolean char name ...      <- names added as each test ends
         boolean                      ... ok           48 ms
         money                        ... FAILED       60 ms
         random                       ... failed (ignored)   120 ms
"""

from __future__ import annotations

import os
import re

OK, FAILED, IGNORED = "ok", "FAILED", "failed (ignored)"
NOT_FINISHED, NOT_RUN = "not finished", "not run"
RESULT_LINE = re.compile(r"^(?:test\s+|\s+)(\S+)\s+\.\.\.\s+(ok|FAILED|failed \(ignored\))"
                         r"(?:.*?\s(\d+)\s+ms)?\s*$")
GROUP_LINE = re.compile(r"^parallel group \((\d+) tests(?:, in groups of \d+)?\):(.*)$")
DIFF_EXCERPT_LINES = 14
# pgsluice's 0A000 when a pin would take a pool's last unpinned servers (README, "pin").
PIN_RESERVE_MARK = "(session_state_pin_reserve)"
PIN_RESERVE_RULE = ":pin_reserve"


def parse_results(text: str) -> dict[str, tuple[str, int | None]]:
    """test -> (status, milliseconds) for each result line of pg_regress's output."""
    results = {}
    for line in text.splitlines():
        m = RESULT_LINE.match(line)
        if m:
            results[m.group(1)] = (m.group(2), int(m.group(3)) if m.group(3) else None)
    return results


def unfinished(text: str, groups: list[list[str]]) -> tuple[list[str], list[str]]:
    """For output cut short: (the current group's tests that had not ended, the later tests)."""
    results = parse_results(text)
    for i, group in enumerate(groups):
        if all(t in results for t in group):
            continue
        ended: set[str] = set()
        for line in text.splitlines():
            m = GROUP_LINE.match(line)
            if m:
                ended = set(m.group(2).split())  # the last group line is the current group's
        if len(group) == 1:
            ended = set()
        running = [t for t in group if t not in results and t not in ended]
        later = [t for g in groups[i + 1:] for t in g]
        return running, later
    return [], []


def read_diffs(diffs_path: str) -> dict[str, str]:
    """test -> its part of regression.diffs (pg_regress starts each with `diff -U3 EXPECTED
    RESULT`)."""
    if not os.path.exists(diffs_path):
        return {}
    diffs: dict[str, list[str]] = {}
    current = None
    with open(diffs_path, errors="replace") as f:
        for line in f:
            if line.startswith("diff "):
                current = os.path.basename(line.split()[-1])
                current = current[:-4] if current.endswith(".out") else current
                diffs[current] = []
            elif current is not None and not line.startswith(("--- ", "+++ ")):
                diffs[current].append(line.rstrip("\n"))
    return {t: "\n".join(lines) for t, lines in diffs.items()}


def excerpt(diff: str, limit: int = DIFF_EXCERPT_LINES) -> str:
    """The first changes of a diff: hunk headers, the context line before each run of changed
    lines, and the changed lines, at most `limit` lines."""
    out: list[str] = []
    previous = ""
    for line in diff.splitlines():
        if len(out) >= limit:
            break
        if line.startswith("@@"):
            out.append(line)
        elif line.startswith(("+", "-")):
            if previous and not previous.startswith(("+", "-", "@@")):
                out.append(previous)
            out.append(line)
        previous = line
    return "\n".join(out[:limit])


def pin_refused(diff: str) -> bool:
    """The diff shows pgsluice refusing a statement to keep its pin reserve."""
    return PIN_RESERVE_MARK in diff


def read_expected(path: str) -> dict[tuple[str, str], str]:
    """expected_failures.txt: `CONFIGS TEST  # reason` lines -> {(config, test): reason}.
    CONFIGS: configuration names, comma-separated, or `*` for every pooled configuration.
    TEST: a test's name, or `:pin_reserve` for any test whose diff shows pgsluice refusing a
    statement to keep its pin reserve (session_state_pin_reserve)."""
    expected = {}
    if not os.path.exists(path):
        return expected
    with open(path) as f:
        for n, line in enumerate(f, 1):
            body, _, reason = line.partition("#")
            words = body.split()
            if not words:
                continue
            if len(words) != 2:
                raise ValueError(f"{path}:{n}: expected `CONFIGS TEST  # reason`: {line.strip()}")
            for config in words[0].split(","):
                expected[(config, words[1])] = reason.strip()
    return expected


def compare(runs: dict[str, dict], expected: dict[tuple[str, str], str]) -> dict[str, dict]:
    """For each pooled run: the direct passes it kept, lost as expected (listed, refused by the
    pin reserve under a `:pin_reserve` line, or `ignore:`d by the schedule), lost unexpectedly;
    and the tests listed for that configuration that passed."""
    direct = runs["direct"]["status"]
    direct_ok = sorted(t for t, s in direct.items() if s == OK)
    out = {}
    for name, run in runs.items():
        if name == "direct":
            continue
        status = run["status"]

        def rule(test: str) -> str | None:
            for key in ((name, test), ("*", test)):
                if key in expected:
                    return expected[key]
            return None

        lost = [t for t in direct_ok if status.get(t) != OK]
        listed = [t for t in lost if rule(t) is not None or status.get(t) == IGNORED]
        pinned = [t for t in lost if t not in listed and t in run.get("pin_refused", [])
                  and rule(PIN_RESERVE_RULE) is not None]
        unexpected = [t for t in lost if t not in listed and t not in pinned]
        stale = sorted({t for (c, t) in expected if c in (name, "*") and status.get(t) == OK})
        out[name] = {"direct_passes": len(direct_ok), "kept": len(direct_ok) - len(lost),
                     "lost": lost, "expected": listed, "pin_reserve": pinned,
                     "unexpected": unexpected, "listed_but_passed": stale}
    return out


def summary(runs: dict[str, dict], comparison: dict[str, dict]) -> str:
    lines = ["", "==== summary ===="]
    direct = runs["direct"]
    n_ok = sum(1 for s in direct["status"].values() if s == OK)
    lines.append(f"direct: {n_ok}/{len(direct['status'])} passed in {direct['seconds']:.0f} s"
                 + _problems(direct))
    if direct.get("baseline_from"):
        lines.append(f"  (the baseline in {direct['baseline_from']}: not run again here)")
    failed_direct = sorted(t for t, s in direct["status"].items() if s != OK)
    if failed_direct:
        lines.append(f"  not passing directly (not compared): {' '.join(failed_direct)}")
    for name, c in comparison.items():
        run = runs[name]
        lines.append(f"{name} ({run['label']}): {c['kept']} of {c['direct_passes']} direct "
                     f"passes kept, in {run['seconds']:.0f} s" + _problems(run))
        if c["expected"]:
            lines.append(f"  lost as expected (expected_failures.txt): {' '.join(c['expected'])}")
        if c["pin_reserve"]:
            lines.append(f"  refused by the pin reserve (expected_failures.txt "
                         f"{PIN_RESERVE_RULE}): {' '.join(c['pin_reserve'])}")
        if c["unexpected"]:
            lines.append(f"  UNEXPECTED: {' '.join(c['unexpected'])}")
        if c["listed_but_passed"]:
            lines.append(f"  listed in expected_failures.txt but passed: "
                         f"{' '.join(c['listed_but_passed'])}")
    unexpected = [(n, t) for n, c in comparison.items() for t in c["unexpected"]]
    if unexpected:
        lines.append("")
        lines.append(f"unexpected failures ({len(unexpected)}): pass directly, fail through "
                     "pgsluice, not in expected_failures.txt")
        for name, test in unexpected:
            run = runs[name]
            lines.append(f"-- {name} {test}: {run['status'].get(test)}")
            text = run["diffs"].get(test)
            if text:
                lines += ["     " + x for x in text.splitlines()]
    else:
        lines.append("no unexpected failures")
    return "\n".join(lines)


def _problems(run: dict) -> str:
    notes = []
    if run.get("stalled"):
        notes.append(f"STALLED: {run['stalled']}")
    if run.get("pooler_problem"):
        notes.append(f"POOLER: {run['pooler_problem'].splitlines()[0]}")
    if run.get("exit_code") not in (0, 1):
        notes.append(f"pg_regress exit code {run.get('exit_code')}")
    return ("; " + "; ".join(notes)) if notes else ""
