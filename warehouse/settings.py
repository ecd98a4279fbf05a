"""gpucost's settings: GPUCOST_* variables from the environment or ./.env, read and checked here.

Every command reads them (the CLI checks them before any command runs), so this module needs only
the standard library: pydantic-settings, pydantic and DuckDB cost each read command a tenth of a
second of start-up (issue 22). `warehouse.db` re-exports `Settings`; each setting is defined once,
below, with its default and the reader of its text.

Where a value comes from, the first that has it: a keyword argument (`Settings(home=...)`), the
environment, `./.env`, the default. Names are case-insensitive, as with pydantic-settings before;
`.env` is read by python-dotenv as pydantic-settings read it (quotes, `export`, `${VAR}`), only when
the file exists. A name without a value (`GPUCOST_HOME` alone on a `.env` line) is not set.

A value that does not read is a `SettingsError` naming each bad variable, its value and the rule
(tests/test_settings.py holds the readers to pydantic's on well-formed input).

Secrets are not here: provider credentials are read by name from the environment by the connector
that needs them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

PREFIX = "GPUCOST_"
ENV_FILE = ".env"
REPLAY_MARKER = ".gpucost-replay-home"

# the messages pydantic gave, which users and the README have seen
_INT_MESSAGE = "Input should be a valid integer, unable to parse string as an integer"
_FLOAT_MESSAGE = "Input should be a valid number, unable to parse string as a number"
_BOOL_MESSAGE = "Input should be a valid boolean, unable to interpret input"
_PATH_MESSAGE = "Input is not a valid path"
_STR_MESSAGE = "Input should be a valid string"

# an integer as people write one: digits with optional underscores, "4.0" read as 4
_INTEGER = re.compile(r"[+-]?\d+(?:_\d+)*(?:\.0+)?", re.ASCII)
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


class SettingsError(ValueError):
    """One or more GPUCOST_* values that do not read; `problems` is (variable, value, why) each."""

    def __init__(self, problems: list[tuple[str, object, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{variable}={value!r}: {why}" for variable, value, why in problems))


def read_int(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value.strip().partition(".")[0])
    raise ValueError(_INT_MESSAGE)


def read_float(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.isascii():  # float() alone would read "٣" as 3.0
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(_FLOAT_MESSAGE)


def read_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    raise ValueError(_BOOL_MESSAGE)


def read_path(value: object) -> Path:
    if isinstance(value, str | os.PathLike):
        return Path(value)
    raise ValueError(_PATH_MESSAGE)


def read_optional_str(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(_STR_MESSAGE)


def positive(value: float) -> float:
    # zero or less would make every failing provider stale at once; NaN is not above zero either
    if not value > 0:
        raise ValueError("Input should be greater than 0")
    return value


def one_line(value: str) -> str:
    value = value.strip()
    if not value or "\n" in value or "\r" in value:
        raise ValueError(
            "GPUCOST_USER_AGENT must be one non-empty line, e.g. "
            "'gpucost/0.1.0 (+https://example.org/contact)'; unset it for the default"
        )
    return value


# how each type's text reads; a field of another type (`given`) is not a setting
_READERS: dict[str, Callable[[object], Any]] = {
    "Path": read_path,
    "float": read_float,
    "int": read_int,
    "bool": read_bool,
    "str | None": read_optional_str,
}
# what a setting must be beyond its type
_CHECKS: dict[str, Callable[[Any], Any]] = {"user_agent": one_line, "stale_after_hours": positive}
DEFAULT_HOME = Path("data")


@dataclass(frozen=True, init=False)
class Settings:
    """Settings from the environment (prefix GPUCOST_) or a .env file, keyword arguments first."""

    home: Path = DEFAULT_HOME
    # where a refresh and `gpucost export` write the feeds and the page: beside the warehouse they
    # come from, whatever the working folder (GPUCOST_FEEDS_DIR to publish them elsewhere); unset,
    # `home / "feeds"` of whatever home is
    feeds_dir: Path = DEFAULT_HOME / "feeds"
    http_timeout_seconds: float = 30.0
    http_retries: int = 4
    http_backoff_seconds: float = 0.5  # first retry waits about this long, then doubles
    http_per_host: int = 4
    # overall limits, retries and waits included: a slow-drip server cannot hold a run forever
    http_request_deadline_seconds: float = 600.0
    provider_deadline_seconds: float = 1800.0
    # guards (warehouse/load.py): a price moving more than this factor either way is held
    price_jump_factor: float = 3.0
    max_usd_per_gpu_hour: float = 2000.0
    accept_changes: bool = False  # publish held price jumps (the CLI's --accept-changes)
    # exchange rates (warehouse/pipeline.py `_load_rates`): a rate further than this share from the
    # median of its currency's last 30 days of rates is quarantined and no repetition confirms it
    # (a wrong rate is a misplaced decimal or an inverted quote: 10x or more, never 20 %; a real
    # move beyond the band waits for --accept-changes, with the prices on the last good rate)
    fx_band_fraction: float = 0.2
    # a rate older than this is stale: marts.gpu_offers.fx_rate_stale, and `gpucost status` warns
    # (the ECB publishes every TARGET working day; a week covers Easter's four-day closure)
    fx_stale_after_days: float = 7.0
    # marketplaces (connectors/market.py): a segment standing on fewer hosts than this that moves
    # more than 1.1x is held as `thin_market` until it stands on this many (warehouse/load.py)
    market_min_hosts: int = 3
    # raw archive (warehouse/archive.py): bodies of runs that changed no price are kept this long
    raw_retention_days: int = 30
    # sent with every request to a provider: who asks and where to reach them. Unset (None), the
    # project's own, connectors.http.USER_AGENT, filled in by make_client: naming it here would
    # import every connector and the HTTP stack into each read command (start-up, issue 22)
    user_agent: str | None = None
    # provider lifecycle (warehouse/lifecycle.py): a provider failing for longer than this since its
    # last good run is stale: its offers leave prices, estimate, the page and the feeds by default
    stale_after_hours: float = 48.0
    # a team's reader machines (warehouse/pull.py): `gpucost pull` reads this publication
    # (s3://bucket/prefix, https://..., or a folder) and the read commands answer from
    # $GPUCOST_HOME/pulled/warehouse.duckdb instead of a scraped warehouse
    pull_url: str | None = None
    # which settings a keyword, the environment or .env gave; the others are defaults
    given: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def __init__(self, **values: object) -> None:
        names = setting_names()
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise TypeError(f"Settings has no setting {', '.join(unknown)}")
        raw = {**_from_env_file(names), **_from_environment(names), **values}
        problems: list[tuple[str, object, str]] = []
        for spec in fields(self):
            if spec.name not in raw:
                continue
            try:
                value = _READERS[str(spec.type)](raw[spec.name])
                if spec.name in _CHECKS:
                    value = _CHECKS[spec.name](value)
            except ValueError as exc:
                problems.append((PREFIX + spec.name.upper(), raw[spec.name], str(exc)))
                continue
            object.__setattr__(self, spec.name, value)
        if problems:
            raise SettingsError(problems)
        if "feeds_dir" not in raw:
            object.__setattr__(self, "feeds_dir", self.home / "feeds")
        object.__setattr__(self, "given", frozenset(raw))

    @property
    def warehouse_path(self) -> Path:
        return self.home / "warehouse.duckdb"

    @property
    def raw_dir(self) -> Path:
        return self.home / "raw"

    @property
    def replay_home(self) -> Path:
        """Where `--replay` writes: its own warehouse, raw archive and feeds, never the live ones.

        `$GPUCOST_HOME/replay`, or GPUCOST_HOME itself when it is a replay's home already (a replay
        left its marker there): pointing GPUCOST_HOME at the folder a replay names must not put the
        next replay in `replay/replay`.
        """
        return self.home if is_replay_home(self.home) else self.home / "replay"


def setting_names() -> tuple[str, ...]:
    """Every setting's field name, in order; its variable is GPUCOST_ and the name in capitals."""
    return tuple(spec.name for spec in fields(Settings) if spec.type in _READERS)


def is_replay_home(folder: Path) -> bool:
    """Whether a replay made `folder` its home (warehouse.db.mark_replay_home)."""
    return (folder / REPLAY_MARKER).is_file()


def _matching(variables: Mapping[str, str | None], names: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for key, value in variables.items():
        name = key.lower().removeprefix(PREFIX.lower())
        if value is not None and key.upper().startswith(PREFIX) and name in names:
            found[name] = value
    return found


def _from_environment(names: tuple[str, ...]) -> dict[str, str]:
    return _matching(os.environ, names)


def _from_env_file(names: tuple[str, ...], path: Path = Path(ENV_FILE)) -> dict[str, str]:
    if not path.is_file():
        return {}
    from dotenv import dotenv_values  # only with a .env to read (the CLI has it imported already)

    return _matching(dotenv_values(path), names)
