-- Statement trigger (knowledge_chunks_vectors_delete, 096): deleted chunks leave their community's
-- vector table (arc_community_vector_index), under the community's lock as an insert is.
create or replace function arc_community_vectors_on_delete() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  c text;
begin
  for c in select w.community from (select distinct o.community from old_rows o) w
            order by arc_community_vectors_slot(w.community), w.community loop
    perform arc_community_vectors_lock(c, false);
    if to_regclass(quote_ident(arc_community_vector_table_name(c))) is not null then
      execute format('delete from %I v using old_rows o where v.id = o.id and o.community = $1',
                     arc_community_vector_table_name(c))
        using c;
    end if;
  end loop;
  return null;
end
$$;

select arc_service_role_only('function', 'arc_community_vectors_on_delete()');
