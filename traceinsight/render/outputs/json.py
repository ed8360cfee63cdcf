"""JSON: the one envelope every kind of document is written in (``render/envelope.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceinsight.render.outputs.base import ALL_KINDS, RenderOptions


@dataclass(frozen=True)
class JsonFormat:
    name: str = "json"
    suffixes: tuple[str, ...] = (".json",)
    binary: bool = False
    kinds: tuple[str, ...] = ALL_KINDS
    label: str = "json"

    def render(self, document: Any, options: RenderOptions) -> str:
        from traceinsight.render.envelope import dumps

        return dumps(document)


FORMAT = JsonFormat()
