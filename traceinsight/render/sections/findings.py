"""Views of the findings section: one stacked block per finding (reads well at 80 columns).

Each block: rank, id and title; the saving (share of the step and time per step), the
confidence and why; the fix; the key evidence (top op with shapes and dtypes, top kernel,
region, ``file:line``). The same facts feed the terminal, Markdown and HTML views.
"""

from __future__ import annotations

from html import escape

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.findings.model import Finding, FindingsResult
from traceinsight.analysis.lib.words import count
from traceinsight.render import views
from traceinsight.render.cut import shorten_end
from traceinsight.render.units import ns

# Evidence rows shown per finding in the report (the JSON has all of them).
MAX_EVIDENCE = 2
# Kernel names are cut to this many characters (two lines at 80 columns); JSON has them whole.
KERNEL_WIDTH = 110


def kernel_name(name: str, width: int = KERNEL_WIDTH) -> str:
    """A demangled kernel name without ``void``, anonymous namespaces and its argument list."""
    text = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0 and i > 0:
            text = text[:i]
            break
    # cut between words, never next to a digit ("BFloat1…" would read as another number)
    return shorten_end(text, width)


def saving_text(f: Finding, result: FindingsResult) -> str:
    if f.memory_text is not None and f.estimate_ns == 0:
        return f.memory_text
    share = "of the steps' time" if result.step_ns and result.steps else "of the window"
    alone = f" (alone {f.alone_pct:.1f} %)" if f.alone_pct is not None and f.alone_pct > f.saving_pct + 0.05 else ""
    if f.per_step and result.step_ns and result.steps:
        return f"{f.saving_pct:.1f} % {share}, {ns(f.saving_ns)} per step{alone}"
    return f"{f.saving_pct:.1f} % {share}, {ns(f.saving_ns)} in the window"


def evidence_rows(f: Finding) -> list[tuple[str, str]]:
    """(label, text) pairs of the finding's key evidence, most telling first."""
    rows: list[tuple[str, str]] = []
    ev = f.evidence
    for op in ev.ops[:MAX_EVIDENCE]:
        parts = [op.name]
        if op.shapes:
            parts.append(op.shapes)
        if op.dtypes:
            parts.append(op.dtypes)
        tail = [f"{op.calls} calls"] if op.calls else []
        if op.dur_ns:
            tail.append(ns(op.dur_ns))
        rows.append(("op", " ".join(parts) + (f" ({', '.join(tail)})" if tail else "")))
    for k in ev.kernels[:MAX_EVIDENCE]:
        tail = [f"{k.calls} calls"] if k.calls else []
        if k.dur_ns:
            tail.append(ns(k.dur_ns))
        if k.tensor_core is not None:
            tail.append("tensor cores" if k.tensor_core else "no tensor cores")
        rows.append(("kernel", kernel_name(k.name) + (f" ({', '.join(tail)})" if tail else "")))
    for r in ev.regions[:MAX_EVIDENCE]:
        tail = [f"{r.calls} calls"] if r.calls else []
        if r.dur_ns:
            tail.append(ns(r.dur_ns))
        rows.append(("region", r.name + (f" ({', '.join(tail)})" if tail else "")))
    if ev.locations:
        rows.append(("at", ", ".join(ev.locations)))
    if ev.rank is not None:
        rows.append(("rank", str(ev.rank)))
    return rows


def levers_text(f: Finding, result: FindingsResult) -> str | None:
    """Each way to apply the fix with what it saves alone: "TF32 matmuls 53.1 % (…); bf16 …"."""
    if len(f.levers) < 2:
        return None
    per = " per step" if f.per_step and result.step_ns and result.steps else ""
    return "; ".join(f"{lv.label} {lv.saving_pct:.1f} % ({ns(lv.saving_ns)}{per})" for lv in f.levers) + " (each alone)"


def facts(f: Finding, result: FindingsResult) -> list[tuple[str, str]]:
    levers = levers_text(f, result)
    rows = [
        ("saving", saving_text(f, result)),
        *([("levers", levers)] if levers else []),
        ("confidence", f"{f.confidence}: {f.confidence_reason}"),
        ("fix", f.fix),
        *evidence_rows(f),
    ]
    if f.overlap:
        rows.append(("note", f.overlap))
    return rows


def _summary(result: FindingsResult) -> str:
    unit = f"{count(result.steps, 'step')} of {ns(result.step_ns)}" if result.step_ns and result.steps else f"a {ns(result.window_ns)} window"
    if result.step_ns and result.steps and result.clock != "traced" and result.step_ns < (result.traced_step_ns or 0):
        unit += f" without the profiler ({result.clock}; traced {ns(result.traced_step_ns or result.step_ns)})"
    savings = [f.saving_pct for f in result.findings]
    # a cause in the code is listed before the launch-bound residual priced after it
    order = "largest saving first" if savings == sorted(savings, reverse=True) else "causes in the code first, then largest saving"
    head = f"{len(result.findings)} finding(s) over {unit}, {order}"
    if result.findings:
        head += f"; each counts what it adds to those above it: all together {result.total_saving_pct:.1f} %"
    return head


def render_terminal(result: FindingsResult) -> RenderableType:
    parts: list[RenderableType] = [Text(_summary(result), style="dim")]
    for i, f in enumerate(result.findings, 1):
        title = Text.assemble((f"{i}. {f.id}", "bold"), "  ", f.title)
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        for key, value in facts(f, result):
            grid.add_row(key, value)
        parts.extend([Text(""), title, grid])
    if not result.findings:
        parts.append(Text("no material finding", style="green"))
    if result.not_material:
        minor = ", ".join(f"{f.id} {f.saving_pct:.1f} %" for f in result.not_material)
        parts.extend([Text(""), Text(f"below {result.materiality_pct:g} %: {minor}", style="dim")])
    return Group(*parts)


def _md(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def render_markdown(result: FindingsResult) -> list[str]:
    """Markdown lines for the section's body."""
    out = [f"_{_summary(result)}._", ""]
    for i, f in enumerate(result.findings, 1):
        out.append(f"### {i}. {_md(f.title)} (`{f.id}`)")
        out.append("")
        out.extend(f"- **{key}**: {_md(value)}" for key, value in facts(f, result))
        out.append("")
    if not result.findings:
        out.extend(["No material finding.", ""])
    if result.not_material:
        minor = ", ".join(f"`{f.id}` {f.saving_pct:.1f} %" for f in result.not_material)
        out.extend([f"Below {result.materiality_pct:g} %: {minor}.", ""])
    return out


def render_html(result: FindingsResult) -> str:
    """The section's body as an HTML fragment."""
    if not result.available:
        return f"<p class='unavailable'>Not available: {escape(result.reason or '')}</p>"
    parts = [f"<p class='note'>{escape(_summary(result))}</p>"]
    for i, f in enumerate(result.findings, 1):
        rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts(f, result))
        parts.append(
            f"<div class='finding'><h3>{i}. {escape(f.title)} <code>{escape(f.id)}</code></h3>"
            f"<dl class='facts'>{rows}</dl></div>"
        )
    if not result.findings:
        parts.append("<p>No material finding.</p>")
    if result.not_material:
        minor = ", ".join(f"{escape(f.id)} {f.saving_pct:.1f} %" for f in result.not_material)
        parts.append(f"<p class='note'>Below {result.materiality_pct:g} %: {minor}</p>")
    return "".join(parts)


views.register(FindingsResult, terminal=render_terminal, markdown=render_markdown, html=render_html)
