"""CSV: the rows a query returned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceinsight.render.outputs.base import RenderOptions


@dataclass(frozen=True)
class CsvFormat:
    name: str = "csv"
    suffixes: tuple[str, ...] = (".csv",)
    binary: bool = False
    kinds: tuple[str, ...] = ("sql",)
    label: str = "csv"

    def render(self, document: Any, options: RenderOptions) -> str:
        text: str = document.rows.write_csv()
        return text


FORMAT = CsvFormat()
