"""What a connector's fault case provides, and small editors that cannot silently do nothing.

A `BodyFaults` names the exchange of the connector's replay cassette that carries its prices
(`target`: a substring of the request URL, or of the request body for POSTs to one endpoint) and
four ways to degrade that body while it still parses:

    bad_row      one priced row made wrong (NaN, $0 or negative price): it must be quarantined
    price_jump   one offer's published price times ten: the anomaly guard must hold it back
    unknown_gpu  one row's GPU (and instance family, where the connector maps by family) renamed
                 to a name containing UNKNOWN_GPU: it must land and show in marts.unmapped_gpus
    renamed_key  the price key (or column header) renamed in every row: never "not offered"

The editors raise when the text or key they are told to change is absent, so a case that no
longer matches its cassette fails loudly instead of injecting nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

UNKNOWN_GPU = "Zeta Z9"  # no seed knows it; the suite looks for "zeta" in unmapped offers

Mutation = Callable[[bytes], bytes]


@dataclass(frozen=True)
class BodyFaults:
    target: str
    bad_row: Mutation
    price_jump: Mutation
    unknown_gpu: Mutation
    renamed_key: Mutation


def replace_once(old: str, new: str) -> Mutation:
    """Replace the first occurrence of `old`; fail if the body does not contain it."""

    def mutate(body: bytes) -> bytes:
        text = body.decode("utf-8")
        if old not in text:
            raise AssertionError(f"fault case expected {old!r} in the body; has the cassette changed?")
        return text.replace(old, new, 1).encode()

    return mutate


def replace_all(old: str, new: str) -> Mutation:
    """Replace every occurrence of `old`; fail if there is none."""

    def mutate(body: bytes) -> bytes:
        text = body.decode("utf-8")
        if old not in text:
            raise AssertionError(f"fault case expected {old!r} in the body; has the cassette changed?")
        return text.replace(old, new).encode()

    return mutate


def edit_json(edit: Callable[[Any], None]) -> Mutation:
    """Load the body as JSON, let `edit` change it in place, dump it back (NaN allowed)."""

    def mutate(body: bytes) -> bytes:
        data = json.loads(body)
        before = json.dumps(data, sort_keys=True)
        edit(data)
        if json.dumps(data, sort_keys=True) == before:
            raise AssertionError("fault case edited nothing; has the cassette changed?")
        return json.dumps(data).encode()

    return mutate


def rename_key(data: Any, old: str, new: str) -> int:
    """Rename `old` to `new` in every mapping of a JSON tree; how many were renamed."""
    count = 0
    if isinstance(data, dict):
        if old in data:
            data[new] = data.pop(old)
            count += 1
        for value in list(data.values()):
            count += rename_key(value, old, new)
    elif isinstance(data, list):
        for value in data:
            count += rename_key(value, old, new)
    return count


def renaming(old: str, new: str | None = None) -> Mutation:
    """A mutation renaming key `old` everywhere (to `<old>_renamed` by default)."""

    def edit(data: Any) -> None:
        if not rename_key(data, old, new or f"{old}_renamed"):
            raise AssertionError(f"fault case expected key {old!r} in the body")

    return edit_json(edit)
