"""Provider connectors: HTTP + parsing only; nothing here knows DuckDB or Prefect.

`CONNECTORS` is the one explicit registry, checked against the modules in this package by a test.
Each entry is a module implementing the contract in `connectors.base`.
"""

from __future__ import annotations

from connectors import (
    akash,
    aws,
    azure,
    coreweave,
    crusoe,
    cudo,
    daytona,
    denvr,
    digitalocean,
    ecb,
    fluidstack,
    gcp,
    genesiscloud,
    hetzner,
    hotaisle,
    hyperstack,
    ibm,
    jarvislabs,
    lambdalabs,
    latitude,
    lightning,
    linode,
    lium,
    massedcompute,
    modal,
    nebius,
    oci,
    ovhcloud,
    paperspace,
    runpod,
    salad,
    scaleway,
    tensordock,
    thundercompute,
    together,
    vast,
    verda,
    voltagepark,
    vultr,
)
from connectors.base import Connector

CONNECTORS: dict[str, Connector] = {
    module.name: module
    for module in (
        azure,
        runpod,
        oci,
        aws,
        gcp,
        ecb,
        vultr,
        vast,
        scaleway,
        verda,
        coreweave,
        hyperstack,
        digitalocean,
        ovhcloud,
        lium,
        linode,
        fluidstack,
        lambdalabs,
        cudo,
        akash,
        paperspace,
        daytona,
        nebius,
        tensordock,
        crusoe,
        jarvislabs,
        salad,
        together,
        thundercompute,
        latitude,
        denvr,
        genesiscloud,
        hotaisle,
        voltagepark,
        massedcompute,
        modal,
        lightning,
        hetzner,
        ibm,
    )
}

__all__ = ["CONNECTORS"]
