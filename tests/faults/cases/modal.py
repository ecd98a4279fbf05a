"""Modal: faults in the hand-written modal.com/pricing page of the replay cassette.

GPUs map by instance-type pattern (`1x nvidia t4`, `[2-8]x nvidia t4`), so `unknown_gpu` renames
a row's label, from which the GPU name and the instance types are built: the RTX PRO 6000 row,
the one sold as 1 GPU, as a model with no documented count is. `renamed_key` renames the "GPU
Tasks" heading the rows are found under: `LayoutChanged`, nothing is closed.
"""

from __future__ import annotations

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="modal.com/pricing",
    bad_row=replace_once("$0.001261 / sec", "$0.000000 / sec"),  # Nvidia H200, 1-8 GPUs
    price_jump=replace_once("$0.001097 / sec", "$0.010970 / sec"),  # Nvidia H100
    unknown_gpu=replace_once(">Nvidia RTX PRO 6000<", f">Nvidia {UNKNOWN_GPU}<"),  # one 1-GPU offer
    renamed_key=replace_all(">GPU Tasks<", ">GPU Functions<"),
)
