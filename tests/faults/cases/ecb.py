"""ECB reference rates: faults in the eurofxref-daily.xml body. FX rates are not offers.

What each fault should do (the shared suite's offer assertions need an FX branch for `ecb`):

- bad_row: GBP's rate becomes 0. The parser yields GBP with `usd_per_unit` NaN; the warehouse
  quarantines it ("rate is not a finite positive number"), the run is `degraded`, EUR and the
  other currencies load, and the last good GBP rate stays in use: never a guess.
- price_jump: GBP's rate times ten (0.84 -> 8.4, so USD per pound / 10). The parser cannot see it
  (it has no history); the warehouse's FX band holds it as `fx_out_of_band` (further than
  GPUCOST_FX_BAND_FRACTION from its month's median), and no repeated run confirms it.
- unknown_gpu: an FX body has no GPUs. The nearest equivalent, an unknown currency code "ZZZ",
  is added; it must load as an ordinary rate (the ECB adds and drops currencies) and change no
  offer, since nothing is priced in ZZZ. The `UNKNOWN_GPU` name cannot appear in FX rates.
- renamed_key: the `rate` attribute renamed to `value` everywhere: `LayoutChanged`, the ECB run
  fails and every last good rate stays current.
"""

from __future__ import annotations

from tests.faults.bodies import BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="eurofxref-daily.xml",
    bad_row=replace_once("currency='GBP' rate='0.84000'", "currency='GBP' rate='0'"),
    price_jump=replace_once("currency='GBP' rate='0.84000'", "currency='GBP' rate='8.4000'"),
    unknown_gpu=replace_once(
        "<Cube currency='USD' rate='1.0800'/>",
        "<Cube currency='USD' rate='1.0800'/><Cube currency='ZZZ' rate='2.1600'/>",
    ),
    renamed_key=replace_all(" rate='", " value='"),
)
