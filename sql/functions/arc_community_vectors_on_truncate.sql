-- Statement trigger (knowledge_chunks_vectors_truncate, 096): every community's vector table
-- (arc_community_vector_index) is emptied with knowledge_chunks. They are found by their name's
-- prefix (arc_community_vector_table_name), in knowledge_chunks' schema: the communities' corpus
-- rows are gone by now.
create or replace function arc_community_vectors_on_truncate() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  tab text;
begin
  for tab in select format('%I.%I', n.nspname, c.relname)
               from pg_class c join pg_namespace n on n.oid = c.relnamespace
              where n.oid = (select relnamespace from pg_class where oid = 'knowledge_chunks'::regclass)
                and c.relkind = 'r' and c.relname like 'arc\_vectors\_%' loop
    execute format('truncate %s', tab);
  end loop;
  return null;
end
$$;

select arc_service_role_only('function', 'arc_community_vectors_on_truncate()');
