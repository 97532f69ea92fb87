-- The knowledge-base version (knowledge_base_state, per community): a counter every change to a
-- community's chunks moves, whoever makes it, so a worker never serves a cached search past a change.
-- Move the version of these communities (rows created as needed, locked in name order).
create or replace function knowledge_base_bump(communities text[])
returns void
language plpgsql
set search_path = public, extensions
as $$
begin
  if communities is null or cardinality(communities) = 0 then
    return;
  end if;
  insert into knowledge_base_state (community)
    select c from unnest(communities) c order by c
  on conflict (community) do nothing;
  perform 1 from knowledge_base_state s where s.community = any (communities) order by s.community for update;
  update knowledge_base_state s set version = s.version + 1, changed_at = now()
   where s.community = any (communities);
end
$$;

select arc_service_role_only('function', 'knowledge_base_bump(text[])');
