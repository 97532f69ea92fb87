-- Statement trigger (knowledge_chunks_vectors_insert, 096): the new chunks of a community with a
-- vector table of its own (arc_community_vector_index) go into it, in the same statement. Each
-- community written shares its lock (arc_community_vectors_lock) before its table is looked for:
-- a build under way is waited for, then written into.
create or replace function arc_community_vectors_on_insert() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  c text;
begin
  for c in select w.community from (select distinct n.community from new_rows n) w
            order by arc_community_vectors_slot(w.community), w.community loop
    perform arc_community_vectors_lock(c, false);
    if to_regclass(quote_ident(arc_community_vector_table_name(c))) is not null then
      execute format('insert into %I (id, document_type, is_binding, superseded_by, embedding) '
                     'select n.id, n.document_type, n.is_binding, n.superseded_by, n.embedding '
                     '  from new_rows n where n.community = $1', arc_community_vector_table_name(c))
        using c;
    end if;
  end loop;
  return null;
end
$$;

select arc_service_role_only('function', 'arc_community_vectors_on_insert()');
