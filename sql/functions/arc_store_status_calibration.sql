-- Store a measurement; an older version never replaces a newer one. Releases the claim. A rerank
-- service's scale (042) goes with it: its three levels, or why it could not be measured. A
-- measurement of another version clears the fitted success cut (092): it was read on the old scale.
drop function if exists arc_store_status_calibration(text, text, bigint, double precision, double precision,
                                                     double precision, integer, boolean, integer);
create or replace function arc_store_status_calibration(community text, embedding_model text,
                                                        kb_version bigint, floor double precision,
                                                        match double precision, near_miss double precision,
                                                        questions integer,
                                                        too_small boolean, measured_ms integer,
                                                        rerank_floor double precision default null,
                                                        rerank_match double precision default null,
                                                        rerank_near_miss double precision default null,
                                                        rerank_failure text default null)
returns void
language sql
set search_path = public, extensions
as $$
  insert into status_calibrations as s (community, embedding_model, kb_version, floor, match, near_miss,
                                        questions, too_small, measured_ms, measured_at,
                                        rerank_floor, rerank_match, rerank_near_miss, rerank_failure)
  values (arc_store_status_calibration.community, arc_store_status_calibration.embedding_model,
          arc_store_status_calibration.kb_version, arc_store_status_calibration.floor,
          arc_store_status_calibration.match, arc_store_status_calibration.near_miss,
          arc_store_status_calibration.questions, arc_store_status_calibration.too_small,
          arc_store_status_calibration.measured_ms, now(),
          arc_store_status_calibration.rerank_floor, arc_store_status_calibration.rerank_match,
          arc_store_status_calibration.rerank_near_miss, arc_store_status_calibration.rerank_failure)
  on conflict (community, embedding_model) do update
     set kb_version = excluded.kb_version, floor = excluded.floor, match = excluded.match,
         near_miss = excluded.near_miss, questions = excluded.questions, too_small = excluded.too_small,
         measured_ms = excluded.measured_ms, measured_at = excluded.measured_at,
         rerank_floor = excluded.rerank_floor, rerank_match = excluded.rerank_match,
         rerank_near_miss = excluded.rerank_near_miss, rerank_failure = excluded.rerank_failure,
         claimed_at = null, claimed_version = null,
         fitted_success_at = case when s.kb_version = excluded.kb_version then s.fitted_success_at end,
         fitted_answerable = case when s.kb_version = excluded.kb_version then s.fitted_answerable end,
         fitted_none = case when s.kb_version = excluded.kb_version then s.fitted_none end,
         fitted_loo_accuracy = case when s.kb_version = excluded.kb_version then s.fitted_loo_accuracy end,
         fitted_configured_accuracy = case when s.kb_version = excluded.kb_version then s.fitted_configured_accuracy end,
         fitted_configured_at = case when s.kb_version = excluded.kb_version then s.fitted_configured_at end,
         fitted_gained = case when s.kb_version = excluded.kb_version then s.fitted_gained end,
         fitted_lost = case when s.kb_version = excluded.kb_version then s.fitted_lost end
   where s.kb_version is null or s.kb_version <= excluded.kb_version
$$;

select arc_service_role_only('function', 'arc_store_status_calibration(text, text, bigint, double precision, double precision, double precision, integer, boolean, integer, double precision, double precision, double precision, text)');
