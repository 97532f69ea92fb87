-- Statement trigger (knowledge_chunks_vectors_update, 096): a community's vector table
-- (arc_community_vector_index) follows the updated chunks whose leg columns (type, binding,
-- superseded, embedding) or community changed, and only those: BM25's bookkeeping updates
-- chunks too, and must not rewrite the graphs. A chunk that moves to another community leaves
-- the one table and enters the other. Under the communities' locks (arc_community_vector_tables_of).
create or replace function arc_community_vectors_on_update() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  c text;
  tab text;
begin
  for c, tab in select * from arc_community_vector_tables_of(
                  array(select o.community from old_rows o union select n.community from new_rows n)) loop
    execute format('delete from %I v using old_rows o join new_rows n on n.id = o.id '
                   ' where v.id = o.id and o.community = $1 and n.community is distinct from $1', tab)
      using c;
    execute format('update %I v set document_type = n.document_type, is_binding = n.is_binding, '
                   '       superseded_by = n.superseded_by, embedding = n.embedding '
                   '  from old_rows o join new_rows n on n.id = o.id '
                   ' where v.id = n.id and n.community = $1 and o.community = $1 '
                   '   and ((o.document_type, o.is_binding, o.superseded_by) is distinct from '
                   '        (n.document_type, n.is_binding, n.superseded_by) '
                   '        or o.embedding is distinct from n.embedding)', tab)
      using c;
    execute format('insert into %I (id, document_type, is_binding, superseded_by, embedding) '
                   'select n.id, n.document_type, n.is_binding, n.superseded_by, n.embedding '
                   '  from new_rows n join old_rows o on o.id = n.id '
                   ' where n.community = $1 and o.community is distinct from $1', tab)
      using c;
  end loop;
  return null;
end
$$;

select arc_service_role_only('function', 'arc_community_vectors_on_update()');
