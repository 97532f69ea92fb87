-- The whole knowledge base's counter (any community's change moves it), as before; and one
-- community's, which is what a worker's cache of that community's searches is checked against.
create or replace function knowledge_base_version() returns bigint
language sql stable
set search_path = public, extensions
as $$
  select coalesce(sum(version), 0)::bigint from knowledge_base_state
$$;

create or replace function knowledge_base_version(community text) returns bigint
language sql stable
set search_path = public, extensions
as $$
  select coalesce((select s.version from knowledge_base_state s
                    where s.community = knowledge_base_version.community), 0)::bigint
$$;

select arc_service_role_only('function', 'knowledge_base_version()');
select arc_service_role_only('function', 'knowledge_base_version(text)');
