-- Statement trigger (knowledge_chunks_bm25_postings_insert, 012): the new chunks' postings.
create or replace function bm25_postings_on_insert() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  perform bm25_postings_add((select array_agg(id) from new_rows));
  return null;
end
$$;

select arc_service_role_only('function', 'bm25_postings_on_insert()');
