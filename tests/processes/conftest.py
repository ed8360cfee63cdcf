"""Fixtures of the tests that start processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chromium import Browser, start


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One headless Chromium for a module's pages: starting it costs more than loading a page."""
    started = start(tmp_path_factory.mktemp("chrome-profile"))
    yield started
    started.close()
