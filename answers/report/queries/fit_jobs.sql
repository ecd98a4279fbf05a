with

jobs as (
    select * from core.finetune_jobs
),

single_gpu as (
    select * from marts.finetune_requirements
    where n_gpus = 1 and sharding = 'none'
),

models as (
    select model_id, params, active_params from core.llm_models
),

final as (
    select
        jobs.job_id,
        jobs.model_id,
        jobs.method,
        jobs.seq_len,
        jobs.micro_batch,
        jobs.dataset_tokens,
        jobs.epochs,
        jobs.precision,
        jobs.optimizer,
        jobs.lora_rank,
        single_gpu.quant,
        single_gpu.trainable_params,
        single_gpu.train_tokens,
        models.params
    from jobs
    inner join single_gpu on jobs.job_id = single_gpu.job_id
    left join models on lower(jobs.model_id) = lower(models.model_id)
)

select * from final
order by model_id, method, seq_len
