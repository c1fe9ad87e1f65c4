"""SVG charts for the workshop reports, drawn with integration/bench/report.py's bar panels
(hand-written SVG, no plotting library). Every chart reads without the report: a title, a line
or two on what was measured, and a footer that names what ran (pgsluice, PgBouncer and PostgreSQL
versions) on which machine, when, with which command."""

from __future__ import annotations

import html
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))
import report  # noqa: E402

COLOR = dict(report.COLOR, pgsluice_noprep="#ff9896")
LABEL = dict(report.LABEL, pgsluice_noprep="pgsluice (mps 0)")
LINE = 15  # px per line of text


def ran_line(res: dict) -> str:
    """pgsluice, PgBouncer (when it ran) and PostgreSQL, as they named themselves."""
    v = res.get("versions", {})
    targets = res.get("targets")
    ran = targets is None or any(t.startswith("pgsluice") for t in targets)
    parts = [(v.get("pgsluice") or "pgsluice") if ran else "pgsluice not run"]
    parts.append(v["pgbouncer"] if v.get("pgbouncer") else "PgBouncer not run")
    pg = (v.get("postgresql") or "").split(" on ")[0]
    if pg:
        parts.append(pg)
    settings = v.get("pg_settings")
    return "; ".join(parts) + (f" ({settings})" if settings else "")


def machine_line(res: dict) -> str:
    m = res.get("machine", {})
    cpu = f" ({m['cpu_model']})" if m.get("cpu_model") else ""
    mem = f", {m['mem_total_gb']} GB" if m.get("mem_total_gb") else ""
    when = (res.get("started") or "")[:16].replace("T", " ")
    return (f"{m.get('cpus', '?')} CPUs{cpu}{mem}, Linux {m.get('kernel', '?')}, shared with "
            f"other work (load {m.get('loadavg_at_end', 0):.1f} at the end); {when}; "
            f"{res.get('stand', 'local')} stand")


def footer(res: dict | None) -> list[str]:
    if not res:
        return []
    return [ran_line(res), machine_line(res), res.get("command", "")]


def _text_lines(lines: list[str], x: float, y: float, size: int = 11,
                fill: str = "#444") -> list[str]:
    return [f'<text x="{x}" y="{y + i * LINE:.0f}" font-size="{size}" fill="{fill}">'
            f'{html.escape(t)}</text>' for i, t in enumerate(lines) if t]


def frame(title: str, what: list[str], body_height: int, width: int, res: dict | None,
          body: list[str]) -> str:
    """The title, the what lines, `body` (drawn from y = top), the footer."""
    # Long lines are wrapped to the width (about 6.6 px a character at 12 px, 5.6 at 10 px).
    what = [w for line in what for w in wrap(line, int(width / 6.6), limit=None)]
    foot = [w for line in footer(res) for w in wrap(line, int(width / 5.6), limit=None)]
    top = 26 + LINE * len(what) + 6
    height = top + body_height + 8 + LINE * len(foot)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="#fff"/>',
           f'<text x="8" y="18" font-size="15" font-weight="bold">{html.escape(title)}</text>']
    out += _text_lines(what, 8, 18 + LINE, size=12, fill="#222")
    out.append(f'<g transform="translate(0,{top})">')
    out += body
    out.append("</g>")
    out += _text_lines(foot, 8, top + body_height + 8 + LINE - 3, size=10, fill="#666")
    return "\n".join(out) + "\n</svg>\n"


def bars(title: str, panels: list[tuple], width: int = 1000, height: int = 380,
         what: list[str] | None = None, res: dict | None = None) -> str:
    """panels: (title, y label, groups, series, data) with data[group][series] = value or
    (median, min, max) or 'failed' or None."""
    pw = width / max(1, len(panels))
    # The legend names what ran ("PgBouncer 1.25.2"), as the report's tables do.
    labels = dict(LABEL, **((res or {}).get("labels") or {}))
    body = []
    for i, (ptitle, ylabel, groups, series, data) in enumerate(panels):
        norm = {g: {s: ((v, v, v) if isinstance(v, (int, float)) else v)
                    for s, v in row.items()} for g, row in data.items()}
        body += report.bar_panel(i * pw, 0, pw, height, ptitle, ylabel, groups, series,
                                 norm, COLOR, labels)
    return frame(title, what or [], height, width, res, body)


def grid(title: str, columns: list[str], rows: list[tuple[str, list[tuple[str, str]]]],
         width: int = 1000, what: list[str] | None = None, res: dict | None = None) -> str:
    """A table of coloured cells: rows are (label, [(state, text) per column]) with state
    'bad' (red), 'good' (green) or 'info' (grey)."""
    fill = {"bad": "#f4b6b6", "good": "#b9e3b0", "info": "#e6e6e6"}
    label_w = min(300, max(120, int(7.4 * max((len(r[0]) for r in rows), default=10)) + 16))
    cw = (width - label_w - 16) / max(1, len(columns))
    rh = 44
    body = []
    for j, c in enumerate(columns):
        body.append(f'<text x="{label_w + j * cw + cw / 2:.1f}" y="14" text-anchor="middle" '
                    f'font-weight="bold" font-size="12">{html.escape(c)}</text>')
    for i, (label, cells) in enumerate(rows):
        y = 24 + i * rh
        body.append(f'<text x="8" y="{y + rh / 2 + 4:.1f}" font-weight="bold">'
                    f'{html.escape(label)}</text>')
        for j, (state, text) in enumerate(cells):
            x = label_w + j * cw
            body.append(f'<rect x="{x + 2:.1f}" y="{y + 2}" width="{cw - 4:.1f}" '
                        f'height="{rh - 4}" rx="4" fill="{fill.get(state, "#fff")}"/>')
            lines = wrap(text, int(cw / 6.2))
            for k, t in enumerate(lines):
                body.append(f'<text x="{x + 8:.1f}" y="{y + 18 + k * 14}" font-size="11">'
                            f'{html.escape(t)}</text>')
    return frame(title, what or [], 24 + rh * len(rows), width, res, body)


def wrap(text: str, width: int, limit: int | None = 2) -> list[str]:
    """Words into lines of at most `width` characters; past `limit` lines the last one shown
    ends with an ellipsis."""
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    if cur:
        lines.append(cur)
    if limit is not None and len(lines) > limit:
        lines = lines[:limit]
        lines[-1] = lines[-1][: max(0, width - 1)] + "…"
    return lines
