-- Statement trigger (knowledge_chunks_bm25_postings_truncate, 012): every posting goes.
create or replace function bm25_postings_on_truncate() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  truncate bm25_postings;
  return null;
end
$$;

select arc_service_role_only('function', 'bm25_postings_on_truncate()');
