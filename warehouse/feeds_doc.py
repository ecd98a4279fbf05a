"""docs/feeds.md, the data dictionary, rendered from the columns (`warehouse.dictionary`) and the
feed list (`warehouse.export`).

It sits above both because it needs both: `export` reads column entries from the dictionary, so the
dictionary cannot import the feed list back (the `no-circles` import contract in pyproject.toml).
Regenerate the doc with `uv run python -m warehouse.feeds_doc`; `--check` exits 1 when it is stale.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from warehouse.dictionary import column
from warehouse.export import FEEDS, Feed

DOC_PATH = Path(__file__).resolve().parents[1] / "docs" / "feeds.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(feeds: Sequence[Feed]) -> str:
    """docs/feeds.md: how to read the feeds, then one table per feed (name, type, unit, meaning)."""
    lines = [
        "# Feeds: the data dictionary",
        "",
        "<!-- Generated from warehouse/dictionary.py and warehouse/export.py by "
        "`uv run python -m warehouse.feeds_doc`; do not edit by hand. -->",
        "",
        "Every refresh and `gpucost export` write these files to `$GPUCOST_FEEDS_DIR` (default",
        "`$GPUCOST_HOME/feeds`), and, when `GPUCOST_FEEDS_URL` is set, to object storage. A feed's",
        "columns never change within a version: a new column means a new version, written beside the",
        "old one.",
        "",
        "- **v1** keeps the marts' names, some of which hide their unit (`intra_node_gbps` is GB/s,",
        "  `inter_node_gbps` is Gb/s).",
        "- **v2** names carry their unit: `_gbytes_per_s` vs `_gbits_per_s`, `_usd_per_hour`,",
        "  `_gb` (10^9 bytes), `_hours`, and `_at` for a UTC timestamp. v2 Parquet files carry",
        "  key/value metadata: `feed`, `feed_version`, `run_id`, `generated_at`, `data_mode`",
        "  (`live` or `replay`) and `columns` (this table as JSON). Their tables below say in `from`",
        "  which mart column or SQL a renamed or derived column comes from (empty: the mart column of",
        "  the same name).",
        "- **`manifest.json`**, written last, lists every file of the publication with its rows,",
        "  bytes and sha256, and the run id, `generated_at` and `data_mode`. Read it first; a file",
        "  whose checksum differs belongs to a newer publication that is still being written.",
        "- `SAMPLE_DATA.txt` sits beside feeds written from recorded sample data (`--replay`).",
        "",
        "Types are DuckDB's (Parquet keeps them; CSV is text). Timestamps are UTC.",
        "",
    ]
    for feed in feeds:
        formats = ", ".join(f"`{feed.filename(fmt)}`" for fmt in feed.formats)
        lines += [
            f"## {feed.name} v{feed.version}",
            "",
            f"{feed.description} Files: {formats}. From `{feed.relation}`"
            + (f", rows where `{feed.where}`" if feed.where != "true" else "")
            + f"; ordered by {', '.join(f'`{c}`' for c in feed.order_by)}.",
            "",
            "| column | type | unit | meaning |" + (" from |" if feed.documented_names else ""),
            "|---|---|---|---|" + ("---|" if feed.documented_names else ""),
        ]
        for name in feed.columns:
            entry = column(name)
            row = f"| `{entry.name}` | {entry.type} | {_cell(entry.unit) or '—'} | {_cell(entry.meaning)} |"
            if feed.documented_names:
                row += f" `{_cell(entry.source)}` |" if entry.source else " |"
            lines.append(row)
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Write docs/feeds.md (`--check`: exit 1 when it is stale instead)."""
    args = list(sys.argv[1:] if argv is None else argv)
    text = render_markdown(FEEDS)
    if "--check" in args:
        stale = not DOC_PATH.exists() or DOC_PATH.read_text() != text
        if stale:
            print(f"{DOC_PATH} is stale; run `uv run python -m warehouse.feeds_doc`", file=sys.stderr)
        return int(stale)
    DOC_PATH.parent.mkdir(parents=True, exist_ok=True)
    DOC_PATH.write_text(text)
    print(f"wrote {DOC_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
