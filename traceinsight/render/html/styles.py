"""Colours and the inlined style sheet of the HTML pages (one file, nothing beside it)."""

from __future__ import annotations

# Idle-gap causes and their colours (shared with the Perfetto export's track names).
CAUSE_COLORS = {
    "busy": "#59a14f",
    "sync": "#e15759",
    "data_loading": "#f28e2b",
    "allocator": "#ff9da7",
    "launch_overhead": "#b07aa1",
    "host_compute": "#9c755f",
    "python": "#edc948",
    "untraced": "#bab0ac",
    "device_wait": "#76b7b2",
    "idle": "#dddddd",
}
BOUND_COLORS = {
    "compute": "#4e79a7",
    "memory": "#f28e2b",
    "overhead": "#e15759",
    "sync": "#b07aa1",
    "host": "#9c755f",
    "data": "#edc948",
    "unknown": "#bab0ac",
}
CATEGORY_COLORS = {"idle": "#cccccc", "compute": "#4e79a7", "communication": "#e15759", "memcpy": "#f28e2b", "memset": "#edc948"}


# Inlined in every page so the file needs nothing beside it.
CSS = """
:root { color-scheme: light; --fg: #222; --muted: #666; --line: #ddd; --accent: #4e79a7; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: #fafafa; }
main { max-width: 1100px; margin: 0 auto; padding: 16px 20px 40px; }
h1 { font-size: 22px; margin: 8px 0 2px; }
h2 { font-size: 18px; margin: 0 0 10px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
.path { color: var(--muted); margin: 0 0 12px; word-break: break-all; }
.verdict { background: #eef4fb; border-left: 4px solid var(--accent); padding: 10px 14px; margin: 12px 0; }
.verdict p { font-size: 16px; font-weight: 600; margin: 0 0 6px; }
.verdict ul { margin: 0; padding-left: 18px; }
.src { color: var(--muted); font-size: 12px; }
nav { display: flex; flex-wrap: wrap; gap: 6px 14px; margin: 8px 0 16px; }
nav a { color: var(--accent); text-decoration: none; }
section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 14px 16px; margin: 14px 0; }
figure { margin: 6px 0 14px; }
figcaption { font-weight: 600; margin-bottom: 4px; }
/* Charts are drawn 900 units wide with 11-unit text (render/svg.py) and never shown narrower,
   so their labels stay 11 px high; a narrower card scrolls them (figure, below). */
svg.chart { display: block; max-width: 100%; min-width: 900px; height: auto; }
svg .muted, .note { fill: var(--muted); color: var(--muted); font-size: 12px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 8px 0; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; overflow-wrap: break-word; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left; white-space: nowrap; }
/* Headers wrap between words, long names anywhere: a table fits its card on a desktop. */
th { white-space: normal; }
td.name { white-space: normal; overflow-wrap: anywhere; min-width: 12em; }
td { max-width: 420px; overflow: hidden; text-overflow: ellipsis; }
td.prose { white-space: normal; min-width: 14em; max-width: 520px; overflow: visible; overflow-wrap: anywhere; }
th { background: #f3f3f3; position: sticky; top: 0; }
.unavailable { color: #8a5a00; background: #fff8e6; padding: 6px 10px; border-radius: 4px; }
footer { color: var(--muted); font-size: 12px; margin-top: 24px; }
/* Nothing wider than its card: a wide table or chart scrolls inside it, long code breaks. */
section, .verdict { min-width: 0; overflow-x: auto; }
.verdict, .finding, dd, li, p { overflow-wrap: break-word; }
code { overflow-wrap: anywhere; }
figure { overflow-x: auto; }
@media (max-width: 640px) {
  main { padding: 10px 8px 30px; }
  section { padding: 10px 10px; }
  /* Label above value: a long label no longer squeezes the value to a letter a line. */
  dl.facts { grid-template-columns: minmax(0, 1fr); gap: 0; }
  dl.facts dd { margin: 0 0 6px 10px; }
  td { max-width: 260px; }
}
"""

