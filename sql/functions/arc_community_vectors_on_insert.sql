-- Statement trigger (knowledge_chunks_vectors_insert, 096): the new chunks of a community with a
-- vector table of its own (arc_community_vector_index) go into it, in the same statement, under
-- the community's lock (arc_community_vector_tables_of).
create or replace function arc_community_vectors_on_insert() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  c text;
  tab text;
begin
  for c, tab in select * from arc_community_vector_tables_of(array(select n.community from new_rows n)) loop
    execute format('insert into %I (id, document_type, is_binding, superseded_by, embedding) '
                   'select n.id, n.document_type, n.is_binding, n.superseded_by, n.embedding '
                   '  from new_rows n where n.community = $1', tab)
      using c;
  end loop;
  return null;
end
$$;

select arc_service_role_only('function', 'arc_community_vectors_on_insert()');
