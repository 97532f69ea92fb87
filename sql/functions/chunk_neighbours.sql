-- A chunk's neighbours in its document (chunk_index within +/- radius, itself included), within the
-- chunk's community, in document order. Context assembly uses it when a chunk is cut mid-thought.
-- ROWS 3 (radius 1, what it is mostly asked for) is the planner's estimate: its SET clause keeps
-- the function from being inlined, and the default estimate, 1,000 rows a call, made the
-- neighbours of a caller-sized context (arc_answer) look costly enough for PostgreSQL's JIT
-- compiler, which spent 300 ms compiling a 4 ms query.
create or replace function chunk_neighbours(chunk_id bigint, radius integer default 1)
returns table (
  id bigint, document_id text, document_name text, document_type text, section_path text,
  page_number integer, chunk_index integer, is_binding boolean, superseded_by text,
  content text, token_count integer, metadata jsonb
)
language sql stable
rows 3
set search_path = public, extensions
as $$
  select n.id, n.document_id, n.document_name, n.document_type, n.section_path,
         n.page_number, n.chunk_index, n.is_binding, n.superseded_by,
         n.content, n.token_count, n.metadata
  from knowledge_chunks c
  join knowledge_chunks n
    on n.community = c.community
   and n.document_id = c.document_id
   and n.chunk_index between c.chunk_index - greatest(radius, 0) and c.chunk_index + greatest(radius, 0)
  where c.id = chunk_id
  order by n.chunk_index
$$;

select arc_service_role_only('function', 'chunk_neighbours(bigint, integer)');
