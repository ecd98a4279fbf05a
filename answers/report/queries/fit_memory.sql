-- The memory breakdown of every configuration the page shows: one GPU unsharded for every job,
-- and the GPU count and sharding of each embedded offer (fit_offers_frame, from fit_offers.sql).
with

shown as (
    select job_id, 1 as n_gpus, 'none' as sharding from core.finetune_jobs
    union
    select job_id, gpus_used as n_gpus, sharding from fit_offers_frame
),

requirements as (
    select * from marts.finetune_requirements
),

final as (
    select
        requirements.job_id,
        requirements.n_gpus,
        requirements.sharding,
        requirements.weights_gb,
        requirements.gradients_gb,
        requirements.optimizer_gb,
        requirements.activations_gb,
        requirements.logits_gb,
        requirements.overhead_gb,
        requirements.total_gb,
        requirements.peak_phase
    from requirements
    inner join shown
        on requirements.job_id = shown.job_id
        and requirements.n_gpus = shown.n_gpus
        and requirements.sharding = shown.sharding
)

select * from final
order by job_id, n_gpus, sharding
