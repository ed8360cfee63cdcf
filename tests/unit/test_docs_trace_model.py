"""docs/trace-model.md documents every column of every frame, so it cannot drift."""

from __future__ import annotations

from pathlib import Path

from traceinsight.trace.schema import FRAME_SCHEMAS

DOC = Path(__file__).resolve().parents[2] / "docs" / "trace-model.md"


def test_every_column_is_documented() -> None:
    text = DOC.read_text()
    missing = sorted(
        f"{frame}.{column}"
        for frame, columns in FRAME_SCHEMAS.items()
        for column in columns
        if f"`{column}`" not in text
    )
    assert not missing, f"undocumented columns: {missing}"
