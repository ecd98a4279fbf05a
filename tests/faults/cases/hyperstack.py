"""Hyperstack: faults in the GPU pricing page (per-GPU prices, one offer per flavor size)."""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="www.hyperstack.cloud/gpu-pricing",
    # B200 and H100 SXM come in 8-GPU flavors only: one row, one offer
    bad_row=replace_once("<span>$6.00</span>", "<span>$0.00</span>"),
    price_jump=replace_once("<span>$3.20</span>", "<span>$32.00</span>"),
    # instance types are "<n>x <GPU label>", so the label is the family as well
    unknown_gpu=replace_all("NVIDIA L40", UNKNOWN_GPU),
    renamed_key=replace_all("Pricing Per Hour", "Hourly Rate"),
)
