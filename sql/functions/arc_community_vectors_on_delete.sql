-- Statement trigger (knowledge_chunks_vectors_delete, 096): deleted chunks leave their community's
-- vector table (arc_community_vector_index), under the community's lock
-- (arc_community_vector_tables_of).
create or replace function arc_community_vectors_on_delete() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  c text;
  tab text;
begin
  for c, tab in select * from arc_community_vector_tables_of(array(select o.community from old_rows o)) loop
    execute format('delete from %I v using old_rows o where v.id = o.id and o.community = $1', tab)
      using c;
  end loop;
  return null;
end
$$;

select arc_service_role_only('function', 'arc_community_vectors_on_delete()');
