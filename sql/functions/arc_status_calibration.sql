-- The stored calibration and the community's current version, in one row (the calibration's
-- columns null when none is stored).
create or replace function arc_status_calibration(community text, embedding_model text)
returns table (kb_version bigint, floor double precision, match double precision, near_miss double precision,
               questions integer, too_small boolean, measured_at timestamptz, current_version bigint)
language sql stable
set search_path = public, extensions
as $$
  select s.kb_version, s.floor, s.match, s.near_miss, coalesce(s.questions, 0), coalesce(s.too_small, false),
         s.measured_at, knowledge_base_version(arc_status_calibration.community)
  from (select 1) one
  left join status_calibrations s
    on s.community = arc_status_calibration.community
   and s.embedding_model = arc_status_calibration.embedding_model
   and s.kb_version is not null
$$;

select arc_service_role_only('function', 'arc_status_calibration(text, text)');
