"""``test_story_agreement``'s checks on every third-party trace (its own file, so that the suite's
workers share the traces); skipped without ``../shared``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_story_agreement import THIRD_PARTY, _id, check_report, needs_shared


@needs_shared
@pytest.mark.parametrize("path", THIRD_PARTY, ids=_id)
def test_every_view_of_a_third_party_trace_tells_one_story(path: Path) -> None:
    check_report(path)
