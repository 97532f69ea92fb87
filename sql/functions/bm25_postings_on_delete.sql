-- Statement trigger (knowledge_chunks_bm25_postings_delete, 012): the deleted chunks' postings go.
create or replace function bm25_postings_on_delete() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  perform bm25_postings_remove((select array_agg(id) from old_rows));
  return null;
end
$$;

select arc_service_role_only('function', 'bm25_postings_on_delete()');
