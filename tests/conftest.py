"""Shared fixtures: paths to ../shared/data (skipping where absent) and a tiny KB."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests check laws, not speed: on a shared 2-core machine one example can take
# longer than Hypothesis's default 200 ms deadline and fail a correct test.
settings.register_profile("wikirag", deadline=None)
settings.load_profile("wikirag")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(autouse=True, scope="session")
def _user_config_dir(tmp_path_factory: pytest.TempPathFactory):
    """The user's own state (hosts an API key went to) in a temp folder, never ~/.config."""
    mp = pytest.MonkeyPatch()
    mp.setenv("WIKIRAG_CONFIG_DIR", str(tmp_path_factory.mktemp("user-config")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data, or skip the test (a user's clone has no shared/ folder)."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent (only present in the team's work area)")
    return SHARED_DATA
