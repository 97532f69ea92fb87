-- The communities holding chunks whose calibration for this model is missing or stale.
create or replace function arc_stale_status_calibrations(embedding_model text)
returns table (community text, current_version bigint, kb_version bigint)
language sql stable
set search_path = public, extensions
as $$
  select k.community, coalesce(k.version, 0), s.kb_version
  from knowledge_communities k
  left join status_calibrations s
    on s.community = k.community and s.embedding_model = arc_stale_status_calibrations.embedding_model
  where s.kb_version is distinct from coalesce(k.version, 0)
  order by k.community
$$;

select arc_service_role_only('function', 'arc_stale_status_calibrations(text)');
