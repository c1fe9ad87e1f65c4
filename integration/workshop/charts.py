"""SVG charts for the workshop reports, drawn with integration/bench/report.py's bar panels
(hand-written SVG, no plotting library)."""

from __future__ import annotations

import html
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))
import report  # noqa: E402

COLOR = dict(report.COLOR, pgsluice_noprep="#ff9896")
LABEL = dict(report.LABEL, pgsluice_noprep="pgsluice (mps 0)")


def bars(title: str, panels: list[tuple], width: int = 1000, height: int = 380) -> str:
    """panels: (title, y label, groups, series, data) with data[group][series] = value or
    (median, min, max) or 'failed' or None."""
    pw = width / max(1, len(panels))
    body = []
    for i, (ptitle, ylabel, groups, series, data) in enumerate(panels):
        norm = {g: {s: ((v, v, v) if isinstance(v, (int, float)) else v)
                    for s, v in row.items()} for g, row in data.items()}
        body += report.bar_panel(i * pw, 24, pw, height - 24, ptitle, ylabel, groups, series,
                                 norm, COLOR, LABEL)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">\n'
            f'<rect width="100%" height="100%" fill="#fff"/>\n'
            f'<text x="8" y="16" font-size="12" fill="#555">{html.escape(title)}</text>\n'
            + "\n".join(body) + "\n</svg>\n")
