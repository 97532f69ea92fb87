-- 007: the monitoring view. Where do candidates come from: both legs, vector only, full-text
-- only, with average scores, per day. If "fts only" stays near 0 the full-text leg adds nothing;
-- if "both" is high the legs agree and the fusion weights matter little.
--   select * from retrieval_source_mix order by day desc limit 14;
create or replace view retrieval_source_mix as
select date_trunc('day', created_at) as day,
       count(*) as queries,
       round(avg(case when status = 'success' then 1.0 else 0.0 end), 3) as success_share,
       round(sum(both_legs_count)::numeric / nullif(sum(candidate_count), 0), 3) as both_legs_share,
       round(sum(vector_only_count)::numeric / nullif(sum(candidate_count), 0), 3) as vector_only_share,
       round(sum(fts_only_count)::numeric / nullif(sum(candidate_count), 0), 3) as fts_only_share,
       round(avg(avg_vector_score)::numeric, 3) as avg_vector_score,
       round(avg(avg_fts_score)::numeric, 3) as avg_fts_score,
       round(avg(best_score)::numeric, 3) as avg_best_score,
       round(avg((timings_ms ->> 'total')::numeric), 1) as avg_total_ms
from query_log
group by 1;
