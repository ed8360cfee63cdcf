"""``test_story_agreement``'s checks on the sample traces in sub-folders of ``sample_traces/``,
the second half in name order (its own file, so that the suite's workers share the work)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_story_agreement import FOLDER_SAMPLES, _id, check_report


@pytest.mark.parametrize("path", FOLDER_SAMPLES[len(FOLDER_SAMPLES) // 2 :], ids=_id)
def test_every_view_of_a_sample_tells_one_story(path: Path) -> None:
    check_report(path)
