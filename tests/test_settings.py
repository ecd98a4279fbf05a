"""warehouse/settings.py: GPUCOST_* read without pydantic, by the rules pydantic-settings applied.

The readers are held to pydantic's own (still installed: the write path's PublishSettings uses it)
on values as people write them; where each value comes from and what a bad one says; and that
reading the settings imports neither pydantic nor DuckDB (start-up, issue 22). test_db_settings.py
holds the CLI's side (one `error:` line, exit 2).
"""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import PositiveFloat, TypeAdapter, ValidationError

from tests.conftest import REPO
from warehouse import settings as settings_module
from warehouse.settings import (
    Settings,
    SettingsError,
    read_bool,
    read_float,
    read_int,
    read_optional_str,
    read_path,
    setting_names,
)


@pytest.fixture(autouse=True)
def _clean_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No GPUCOST_* from the machine, and a working directory with no .env of its own."""
    for name in setting_names():
        monkeypatch.delenv(f"GPUCOST_{name.upper()}", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _pydantic(annotation: object, text: object) -> object:
    """What pydantic (lax, as pydantic-settings read the environment) makes of `text`: a value,
    or the message of its first error."""
    try:
        return TypeAdapter(annotation).validate_python(text)
    except ValidationError as exc:
        return exc.errors()[0]["msg"]


def _ours(read, text: object) -> object:
    try:
        return read(text)
    except ValueError as exc:
        return str(exc)


def _same(ours: object, theirs: object) -> bool:
    if isinstance(ours, float) and isinstance(theirs, float) and math.isnan(ours):
        return math.isnan(theirs)
    return type(ours) is type(theirs) and ours == theirs


# values as people write them in a .env: numbers (Python's own spellings, padded or not), the
# words pydantic knows for booleans, and what is none of these
NUMBERS = st.one_of(
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(-1e6, 1e6).map(lambda x: f"{x:.3f}"),
)
WORDS = st.sampled_from(
    ["true", "False", "YES", "no", "on", "OFF", "t", "f", "y", "N", "1", "0", "", "thirty", "2", "1e3", " 7 "]
)
# (pydantic reads "1_000" but not " 1_000 ": a quirk no one relies on, left out of the comparison)
TEXTS = st.one_of(
    NUMBERS, WORDS, NUMBERS.map(lambda s: f" {s} "), st.integers(0, 10**6).map(lambda n: f"{n:_}")
)


@given(TEXTS)
def test_numbers_and_booleans_read_as_pydantic_read_them(text: str):
    for read, annotation in ((read_int, int), (read_float, float), (read_bool, bool)):
        ours, theirs = _ours(read, text), _pydantic(annotation, text)
        assert _same(ours, theirs), (annotation, text, ours, theirs)


@pytest.mark.parametrize(
    "text",
    ["4", "+4", "-4", " 4 ", "4.0", "4.5", "4.", ".5", "1_000", "1e3", "007", "0x10", "inf", "nan", ""],
)
def test_the_edge_cases_people_meet_read_as_pydantic_read_them(text: str):
    for read, annotation in ((read_int, int), (read_float, float), (read_bool, bool)):
        assert _same(_ours(read, text), _pydantic(annotation, text)), (annotation, text)
    assert _same(_ours(read_path, text), _pydantic(Path, text))
    assert _same(_ours(read_optional_str, text), _pydantic(str | None, text))


def test_digits_of_another_script_are_not_a_number():
    """float() reads the Arabic-Indic three as 3.0; pydantic did not, and neither do we."""
    assert _pydantic(float, "٣") == _ours(read_float, "٣") == settings_module._FLOAT_MESSAGE
    assert _pydantic(int, "٣") == _ours(read_int, "٣") == settings_module._INT_MESSAGE


def test_keyword_values_that_are_already_typed_read_as_pydantic_read_them():
    assert _same(read_float(2), 2.0) and _same(read_int(3), 3) and read_path(Path("x")) == Path("x")
    assert read_optional_str(None) is None
    for read, annotation, value in ((read_int, int, 2.5), (read_bool, bool, "maybe"), (read_path, Path, 3)):
        assert isinstance(_ours(read, value), str) and isinstance(_pydantic(annotation, value), str)
    zero = _pydantic(PositiveFloat, 0.0)
    with pytest.raises(SettingsError, match=f"GPUCOST_STALE_AFTER_HOURS=0.0: {zero}"):
        Settings(stale_after_hours=0.0)
    with pytest.raises(SettingsError, match="GPUCOST_STALE_AFTER_HOURS=nan: Input should be greater than 0"):
        Settings(stale_after_hours=float("nan"))


def test_a_keyword_wins_over_the_environment_which_wins_over_dotenv(tmp_path: Path, monkeypatch):
    (tmp_path / ".env").write_text(
        "GPUCOST_HOME=from-dotenv\nGPUCOST_HTTP_RETRIES=7\nexport GPUCOST_PRICE_JUMP_FACTOR='5'\n"
    )
    monkeypatch.setenv("GPUCOST_HTTP_RETRIES", "9")
    monkeypatch.setenv("GPUCOST_HOME", "from-env")
    settings = Settings(home=tmp_path / "kw")
    assert settings.home == tmp_path / "kw" and settings.feeds_dir == tmp_path / "kw" / "feeds"
    assert (settings.http_retries, settings.price_jump_factor) == (9, 5.0)  # `export`, quotes
    assert settings.given == {"home", "http_retries", "price_jump_factor"}
    assert Settings().home == Path("from-env")


def test_names_are_case_insensitive_and_a_name_without_a_value_is_not_set(tmp_path: Path, monkeypatch):
    (tmp_path / ".env").write_text("gpucost_raw_retention_days=12\nGPUCOST_HOME\nGPUCOST_NOT_A_SETTING=1\n")
    monkeypatch.setenv("Gpucost_Accept_Changes", "yes")
    settings = Settings()
    assert (settings.raw_retention_days, settings.accept_changes, settings.home) == (12, True, Path("data"))
    assert settings.given == {"raw_retention_days", "accept_changes"}


def test_dotenv_values_refer_to_other_variables(tmp_path: Path, monkeypatch):
    """python-dotenv's ${VAR} expansion, as pydantic-settings had it: one .env across machines."""
    monkeypatch.setenv("SHARED_ROOT", str(tmp_path / "shared"))
    (tmp_path / ".env").write_text("GPUCOST_HOME=${SHARED_ROOT}/gpucost\n")
    assert Settings().home == tmp_path / "shared" / "gpucost"


def test_every_bad_value_is_named_in_one_error_in_the_order_of_the_settings(monkeypatch):
    monkeypatch.setenv("GPUCOST_STALE_AFTER_HOURS", "-1")
    monkeypatch.setenv("GPUCOST_HTTP_RETRIES", "four")
    monkeypatch.setenv("GPUCOST_ACCEPT_CHANGES", "maybe")
    with pytest.raises(SettingsError) as failed:
        Settings()
    assert [variable for variable, _, _ in failed.value.problems] == [
        "GPUCOST_HTTP_RETRIES",
        "GPUCOST_ACCEPT_CHANGES",
        "GPUCOST_STALE_AFTER_HOURS",
    ]
    assert str(failed.value) == (
        f"GPUCOST_HTTP_RETRIES='four': {_pydantic(int, 'four')}; "
        f"GPUCOST_ACCEPT_CHANGES='maybe': {_pydantic(bool, 'maybe')}; "
        f"GPUCOST_STALE_AFTER_HOURS='-1': {_pydantic(PositiveFloat, '-1')}"
    )
    assert isinstance(failed.value, ValueError)  # as pydantic's ValidationError was


@pytest.mark.parametrize("value", ["", "  ", "two\nlines", "a\rb"])
def test_a_user_agent_is_one_non_empty_line(value: str, monkeypatch):
    monkeypatch.setenv("GPUCOST_USER_AGENT", value)
    with pytest.raises(SettingsError, match="GPUCOST_USER_AGENT must be one non-empty line"):
        Settings()


def test_settings_are_frozen_and_an_unknown_keyword_is_refused():
    settings = Settings()
    with pytest.raises(FrozenInstanceError):
        settings.home = Path("elsewhere")  # type: ignore[misc]
    with pytest.raises(TypeError, match="Settings has no setting hom"):
        Settings(hom=Path("typo"))
    assert Settings() == settings and "given" not in repr(settings)


def test_every_field_but_given_is_a_setting_with_its_documented_default():
    assert setting_names()[:2] == ("home", "feeds_dir") and "given" not in setting_names()
    defaults = Settings()
    assert defaults.given == frozenset()
    assert (defaults.http_timeout_seconds, defaults.http_retries) == (30.0, 4)
    assert defaults.stale_after_hours == 48.0
    assert (defaults.user_agent, defaults.pull_url, defaults.feeds_dir) == (None, None, Path("data/feeds"))


def test_reading_the_settings_imports_neither_pydantic_nor_duckdb(tmp_path: Path):
    (tmp_path / ".env").write_text("GPUCOST_HOME=elsewhere\n")
    code = (
        "import sys; from warehouse.settings import Settings; assert str(Settings().home) == 'elsewhere'; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'pydantic_settings', 'duckdb'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
