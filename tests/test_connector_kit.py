"""Every registered connector comes with its kit: a test module, fixtures (or a real-capture test), a
replay cassette holding its price exchange, and a case in the shared fault-injection suite.

A connector missing any one fails here with a message naming what is missing and where it goes.
`connectors.CONNECTORS` is the list (tests/test_registry.py checks it against the package); library
modules such as connectors/market.py and connectors/pages.py are not in it and need no kit.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from connectors import CONNECTORS
from tests.conftest import REPO
from tests.faults import test_faults
from tests.faults.bodies import BodyFaults

TESTS = REPO / "tests"


def _cassette_entries(replay: Path) -> list[tuple[str, str, Path]]:
    """(url, body, body file) of every cassette entry under `replay`."""
    entries = []
    for meta_path in sorted(replay.rglob("*.json")):
        try:
            meta = json.loads(meta_path.read_text())
            request, response = meta["request"], meta["response"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a fixture body that happens to be JSON, not an entry
        body_file = (meta_path.parent / response["body_file"]).resolve()
        entries.append((str(request["url"]), str(request.get("body") or ""), body_file))
    return entries


def missing_kit(slug: str, tests: Path = TESTS) -> list[str]:
    """What of its kit connector `slug` lacks, each naming the file or folder to add."""
    missing = []
    module = tests / f"test_{slug}.py"
    if not module.is_file():
        missing.append(f"its test module tests/test_{slug}.py")
    fixtures = tests / "fixtures" / slug
    has_fixtures = fixtures.is_dir() and any(p.is_file() for p in fixtures.rglob("*"))
    real_capture_test = module.is_file() and "shared_raw" in module.read_text()
    if not (has_fixtures or real_capture_test):
        missing.append(
            f"fixtures in tests/fixtures/{slug}/ (our own, in the source's format) or a test reading "
            "the real captures through the `shared_raw` fixture"
        )
    try:
        case = importlib.import_module(f"tests.faults.cases.{slug}")
    except ModuleNotFoundError:
        case = None
    faults = getattr(case, "FAULTS", None)
    if not isinstance(faults, BodyFaults):
        missing.append(
            f"a fault case tests/faults/cases/{slug}.py defining FAULTS = BodyFaults(target=...) "
            "(see tests/faults/bodies.py)"
        )
        # without a case there is no target to find the price exchange by
        return [*missing, "a replay cassette in tests/replay/<host>/ holding its price exchange"]
    hits = [
        body_file
        for url, body, body_file in _cassette_entries(tests / "replay")
        if faults.target in url or faults.target in body
    ]
    if not hits:
        missing.append(
            f"a replay cassette in tests/replay/<host>/ whose request URL or body contains the fault "
            f"case's target {faults.target!r} (record one with `gpucost refresh --record DIR`)"
        )
    elif not all(path.is_file() for path in hits):
        gone = [str(p) for p in hits if not p.is_file()]
        missing.append(f"the replay cassette's body file(s) {gone}")
    return missing


@pytest.mark.parametrize("slug", sorted(CONNECTORS))
def test_every_connector_has_its_kit(slug: str):
    missing = missing_kit(slug)
    assert not missing, f"connector {slug!r} is missing: " + "; ".join(missing)


def test_the_fault_suite_runs_every_registered_connector():
    """The kit's last part is passing the shared faults: that suite is parametrized over the registry."""
    assert sorted(CONNECTORS) == test_faults.SLUGS


def test_a_connector_without_a_kit_is_told_each_missing_part(tmp_path: Path):
    (tmp_path / "replay").mkdir()
    missing = missing_kit("zeta_cloud", tests=tmp_path)
    assert len(missing) == 4, missing
    for part in (
        "tests/test_zeta_cloud.py",
        "tests/fixtures/zeta_cloud/",
        "tests/faults/cases/zeta_cloud.py",
    ):
        assert any(part in m for m in missing), (part, missing)
    assert "replay cassette" in missing[-1]


def test_fixtures_or_a_real_capture_test_either_one_is_enough(tmp_path: Path):
    (tmp_path / "replay").mkdir()
    (tmp_path / "test_zeta_cloud.py").write_text("def test_real(shared_raw): ...\n")
    assert not any("fixtures" in m for m in missing_kit("zeta_cloud", tests=tmp_path))
    (tmp_path / "test_zeta_cloud.py").write_text("def test_parse(): ...\n")
    assert any("fixtures" in m for m in missing_kit("zeta_cloud", tests=tmp_path))
    (tmp_path / "fixtures" / "zeta_cloud").mkdir(parents=True)
    (tmp_path / "fixtures" / "zeta_cloud" / "prices__2026-12-01.json").write_text("{}")
    assert not any("fixtures" in m for m in missing_kit("zeta_cloud", tests=tmp_path))


def test_a_cassette_that_does_not_hold_the_price_exchange_is_missing(tmp_path: Path):
    """linode's real fault case against a cassette folder holding another host's exchange only."""
    host = tmp_path / "replay" / "api.example.test"
    host.mkdir(parents=True)
    (host / "other.body").write_text("{}")
    entry = {
        "request": {"method": "GET", "url": "https://api.example.test/v1/other", "body": None},
        "response": {"status": 200, "headers": {}, "body_file": "other.body"},
    }
    (host / "other.json").write_text(json.dumps(entry))
    (tmp_path / "test_linode.py").write_text("def test_real(shared_raw): ...\n")
    missing = missing_kit("linode", tests=tmp_path)
    assert len(missing) == 1 and "'linode/types?page=1'" in missing[0], missing
    entry["request"]["url"] = "https://api.linode.com/v4/linode/types?page=1&page_size=500"
    (host / "types.json").write_text(json.dumps(entry))
    assert missing_kit("linode", tests=tmp_path) == []
