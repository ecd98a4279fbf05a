"""The comparison page's size and load time on the full replay data, against its 2 MB target.

    uv run python benchmarks/report_size.py [--home DIR] [--loads 5]

Builds the replay warehouse (every provider, the whole fine-tuning job grid) in DIR (a temp folder
by default; an existing one is reused), renders the page with 3, 6 (the default, `TOP_OFFERS`)
and 10 offers per job and pricing type side by side, and prints what each part weighs, raw and
gzipped. With Chromium on the machine (Debian's `chromium`) it then opens the default page from
file:// with the network cut, `--loads` times, and prints the median time until the page is usable
(its script's `gpucost-ready` mark, DOMContentLoaded, load) and to switch to each view.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

# the replay builder and the browser driver live with the tests
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from answers import report
from tests.cdp import Chromium, find_chromium
from tests.replay_warehouse import build_replay_warehouse
from warehouse.db import connect

TARGET_BYTES = 2_000_000
VARIANTS = (3, report.TOP_OFFERS, 10)


def kb(n: int) -> str:
    return f"{n / 1000:,.0f} kB"


def sizes(con, top: int) -> tuple[dict[str, int], float, float]:
    """Bytes per part of the page, and the seconds to gather the data and to render it."""
    started = time.perf_counter()
    data = report.report_data(con)
    data["fit"] = report.fit_data(con, top=top)
    gathered = time.perf_counter() - started
    started = time.perf_counter()
    html = report.render_html(data)
    rendered = time.perf_counter() - started
    parts = {
        f"data: {key}": len(json.dumps(value, separators=(",", ":")).encode())
        for key, value in data.items()
        if key in ("offers", "gpus", "providers", "history", "freshness")
    }
    for key in ("jobs", "memory", "offers", "runs"):
        parts[f"data: fit.{key}"] = len(json.dumps(data["fit"][key], separators=(",", ":")).encode())
    parts["vendored JS + CSS"] = sum((report.ASSETS_DIR / v.path).stat().st_size for v in report.VENDORED)
    parts["our JS + CSS"] = sum((report.ASSETS_DIR / n).stat().st_size for n in ("app.js", "style.css"))
    encoded = html.encode()
    parts["page"] = len(encoded)
    parts["page, gzipped"] = len(gzip.compress(encoded))
    return parts, gathered, rendered


def load_times(page: Path, loads: int) -> dict[str, float] | None:
    executable = find_chromium()
    if executable is None:
        return None
    timings: dict[str, list[float]] = {
        "page script done (ms)": [],
        "DOMContentLoaded (ms)": [],
        "load (ms)": [],
    }
    switch = (
        "new Promise(done => {{ const t = performance.now();"
        " addEventListener('hashchange', () => requestAnimationFrame(() => done(performance.now() - t)),"
        " {{once: true}}); location.hash = '#{view}'; }})"
    )
    with Chromium(executable, width=1366, height=900) as browser:
        browser.offline()
        for _ in range(loads):
            browser.open(page.resolve().as_uri())
            browser.wait_for("document.body.dataset.ready === 'true'")
            timings["page script done (ms)"].append(
                browser.evaluate("performance.getEntriesByName('gpucost-ready')[0].startTime")
            )
            navigation = "performance.getEntriesByType('navigation')[0]"
            timings["DOMContentLoaded (ms)"].append(
                browser.evaluate(f"{navigation}.domContentLoadedEventEnd")
            )
            timings["load (ms)"].append(browser.evaluate(f"{navigation}.loadEventEnd"))
            for view in ("fit", "history", "freshness", "compare"):
                timings.setdefault(f"switch to {view} (ms)", []).append(
                    browser.evaluate(switch.format(view=view))
                )
    return {name: statistics.median(values) for name, values in timings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="folder for the replay warehouse (reused when present)")
    parser.add_argument("--loads", type=int, default=5, help="page loads to take the median of")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="gpucost-report-bench-"))
    home.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    path = build_replay_warehouse(home)
    print(f"replay warehouse {path} ready in {time.perf_counter() - started:.1f} s")
    con = connect(path, read_only=True)
    try:
        results = {top: sizes(con, top) for top in VARIANTS}
        page = report.write_report(con, home / "site")
    finally:
        con.close()

    names = list(results[VARIANTS[0]][0])
    header = ["part"] + [
        f"top {top}" + (" (default)" if top == report.TOP_OFFERS else "") for top in VARIANTS
    ]
    table = [[name] + [kb(results[top][0][name]) for top in VARIANTS] for name in names]
    table.append(["gather data (s)"] + [f"{results[top][1]:.2f}" for top in VARIANTS])
    table.append(["render page (s)"] + [f"{results[top][2]:.2f}" for top in VARIANTS])
    table.append(
        ["page / 2 MB target"] + [f"{results[top][0]['page'] / TARGET_BYTES:.0%}" for top in VARIANTS]
    )
    widths = [max(len(row[i]) for row in [header, *table]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *table]:
        print(
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )

    print(f"\npage written to {page} ({page.stat().st_size:,} bytes)")
    timings = load_times(page, args.loads)
    if timings is None:
        print(
            "no Chromium found (apt-get install chromium, or set GPUCOST_CHROMIUM): load times not measured"
        )
        return
    print(f"\nChromium, file://, network cut, median of {args.loads} loads (1366x900):")
    for name, value in timings.items():
        print(f"  {name:<28} {value:8.0f}")


if __name__ == "__main__":
    main()
