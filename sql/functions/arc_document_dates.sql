-- A community's documents with the day each took effect (null: undated), read from each one's
-- first chunk: those named in ids, or all of them when ids is null. Answers as of a date name what
-- replaced a passage and when, and say when nothing was in force yet (worker/retrieve/in_force.py);
-- the ingest checks a replacement is not dated before what it replaces. A function, so that the
-- Supabase backend reaches it through RPC as the direct one does.
create or replace function arc_document_dates(community text, ids text[] default null)
returns table (document_id text, document_name text, effective_date date)
language sql stable
set search_path = public, extensions
as $$
  select c.document_id, c.document_name, (c.metadata ->> 'effective_date')::date
  from knowledge_chunks c
  where c.community = arc_document_dates.community and c.chunk_index = 0
    and (ids is null or c.document_id = any (ids))
$$;

select arc_service_role_only('function', 'arc_document_dates(text, text[])');
