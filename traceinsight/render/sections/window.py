"""Terminal view of the window assessment: steady or not, and each flag with its evidence."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from traceinsight.analysis.window.spec import WindowResult
from traceinsight.render import views
from traceinsight.render.units import ns


def render_terminal(result: WindowResult) -> RenderableType:
    if result.steady:
        head = Text("steady state: no flag limits what this window can tell", style="green")
    elif result.excluded_ns:
        head = Text(
            f"not steady state: {ns(result.excluded_ns)} of the {ns(result.window_ns)} window left out of the findings' savings",
            style="yellow",
        )
    else:
        # nothing to take out of the window: the trace itself is short of something
        head = Text(f"limited: {', '.join(f.title for f in result.limiting)}", style="yellow")
    parts: list[RenderableType] = [head]
    real = result.real_step
    if real is not None:
        clock = {"recorded": "recorded by capture", "model": "estimated by the calibrated model", "traced": "the traced step (no estimate)"}[real.source]
        span = "" if real.lo_ns == real.hi_ns else f" ({ns(real.lo_ns)}–{ns(real.hi_ns)})"
        parts.append(Text(f"step without the profiler: {ns(real.step_ns)}{span} against {ns(real.traced_ns)} traced; clock: {clock}", style="bold"))
        parts.append(Text(f"  {real.method}", style="dim"))
    for flag in result.flags:
        style = "bold yellow" if flag.limits else "bold"
        parts.append(Text(f"{flag.id} — {flag.title}" + (" (limits the window)" if flag.limits else " (a note)"), style=style))
        parts.append(Text(f"  {flag.evidence}"))
        if flag.advice:
            parts.append(Text(f"  record instead: {flag.advice}", style="dim"))
    return Group(*parts)


views.register(WindowResult, terminal=render_terminal)
