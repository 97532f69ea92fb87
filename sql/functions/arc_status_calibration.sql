-- The stored calibration and the community's current version, in one row (the calibration's
-- columns null when none is stored), with a rerank service's scale when one was measured (042)
-- and the success cut the community's confirmed questions fitted on it (092).
drop function if exists arc_status_calibration(text, text);
create or replace function arc_status_calibration(community text, embedding_model text)
returns table (kb_version bigint, floor double precision, match double precision, near_miss double precision,
               questions integer, too_small boolean, measured_at timestamptz, current_version bigint,
               rerank_floor double precision, rerank_match double precision,
               rerank_near_miss double precision, rerank_failure text,
               fitted_success_at double precision, fitted_answerable integer, fitted_none integer,
               fitted_loo_accuracy double precision, fitted_configured_accuracy double precision,
               fitted_configured_at double precision, fitted_gained integer, fitted_lost integer)
language sql stable
set search_path = public, extensions
as $$
  select s.kb_version, s.floor, s.match, s.near_miss, coalesce(s.questions, 0), coalesce(s.too_small, false),
         s.measured_at, knowledge_base_version(arc_status_calibration.community),
         s.rerank_floor, s.rerank_match, s.rerank_near_miss, s.rerank_failure,
         s.fitted_success_at, s.fitted_answerable, s.fitted_none, s.fitted_loo_accuracy,
         s.fitted_configured_accuracy, s.fitted_configured_at, s.fitted_gained, s.fitted_lost
  from (select 1) one
  left join status_calibrations s
    on s.community = arc_status_calibration.community
   and s.embedding_model = arc_status_calibration.embedding_model
   and s.kb_version is not null
$$;

select arc_service_role_only('function', 'arc_status_calibration(text, text)');
