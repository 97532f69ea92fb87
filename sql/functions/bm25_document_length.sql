-- |d| of BM25: a chunk's length in lexemes (the sum of each lexeme's positions).
create or replace function bm25_document_length(doc tsvector)
returns integer
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select coalesce(sum(coalesce(array_length(t.positions, 1), 1)), 0)::integer from unnest(doc) as t
$$;

select arc_service_role_only('function', 'bm25_document_length(tsvector)');
