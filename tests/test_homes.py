"""Tests leave the machine as they found it: every home they use is a temporary folder."""

from __future__ import annotations

import os
from pathlib import Path


def test_prefect_home_is_not_the_users() -> None:
    # conftest points PREFECT_HOME at a session temp dir before prefect is imported; a caller that
    # chose one (.ci/run makes a mktemp -d) keeps it. Either way prefect must not resolve ~/.prefect.
    from prefect.settings import get_current_settings

    home = Path(get_current_settings().home).resolve()
    assert home != (Path.home() / ".prefect").resolve()
    assert home == Path(os.environ["PREFECT_HOME"]).resolve()
