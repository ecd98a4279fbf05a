-- The step series: at every moment an interval opens or closes, the cheapest $/GPU-hour of the
-- intervals valid then (null: no offer of that group was current, a gap in the line).
with

intervals as (
    select * from history_intervals_frame
),

events as (
    select distinct gpu_name, provider, pricing_type, valid_from as changed_at from intervals
    union
    select distinct gpu_name, provider, pricing_type, valid_to as changed_at from intervals
    where valid_to is not null
),

final as (
    select
        events.gpu_name,
        events.provider,
        events.pricing_type,
        epoch(events.changed_at)::bigint as changed_at,
        min(intervals.price_usd_per_gpu_hour) as price_usd_per_gpu_hour
    from events
    left join intervals
        on events.gpu_name = intervals.gpu_name
        and events.provider = intervals.provider
        and events.pricing_type = intervals.pricing_type
        and intervals.valid_from <= events.changed_at
        and (intervals.valid_to is null or intervals.valid_to > events.changed_at)
    group by all
)

select * from final
order by gpu_name, provider, pricing_type, changed_at
