-- The vector tables (arc_community_vector_index) of the communities a write touches, for the sync
-- triggers on knowledge_chunks (arc_community_vectors_on_insert and the others): each community's
-- lock (arc_community_vectors_lock) is shared first, in the order of their slots, so a build under
-- way is waited for and then written into, and a build and the writers never wait on each other
-- in a cycle. A community without a table of its own is left out.
create or replace function arc_community_vector_tables_of(communities text[])
returns table (community text, vector_table text)
language plpgsql
set search_path = public, extensions
as $$
declare
  c text;
begin
  for c in select w.c from unnest(communities) as w(c) group by w.c
            order by arc_community_vectors_slot(w.c), w.c loop
    perform arc_community_vectors_lock(c, false);
    vector_table := arc_community_vector_table_name(c);
    if to_regclass(quote_ident(vector_table)) is not null then
      community := c;
      return next;
    end if;
  end loop;
end
$$;

select arc_service_role_only('function', 'arc_community_vector_tables_of(text[])');
