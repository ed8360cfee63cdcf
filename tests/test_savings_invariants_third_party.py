"""The bounds of ``test_savings_invariants`` on every third-party trace (its own file, so that
the suite's workers share the traces); skipped without ``../shared``."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_savings_invariants import OTHERS, _findings, check


@pytest.mark.parametrize("path", OTHERS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_savings_keep_their_bounds_on_third_party_traces(path: Path) -> None:
    found = _findings(path)
    if found is None:
        return
    assert not check(found), check(found)
