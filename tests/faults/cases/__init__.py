"""One module per registered connector: how to break its replay cassette's bodies.

`tests/faults/test_faults.py` imports `tests.faults.cases.<slug>` for every connector in
`connectors.CONNECTORS` and fails when one is missing, so a new connector cannot land without
saying how its answers can be degraded. Each module defines `FAULTS = BodyFaults(...)`.
"""
