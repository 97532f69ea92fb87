-- Stable across Postgres versions (unlike hashtext): 32 bits of md5, folded into sparsevec's
-- index range. Two lexemes sharing an index only matter if both are in one query and one chunk.
create or replace function bm25_lexeme_index(lexeme text)
returns integer
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select (('x' || substr(md5(lexeme), 1, 8))::bit(32)::bigint % 999999999)::integer + 1
$$;

select arc_service_role_only('function', 'bm25_lexeme_index(text)');
