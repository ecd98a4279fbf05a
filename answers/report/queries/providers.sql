select
    provider,
    display_name,
    billing_granularity,
    minimum_charge_seconds,
    spot_kind,
    persistent_storage,
    ssh_access,
    docker_image,
    jupyter,
    multi_node_networking,
    source
from core.providers
order by provider
