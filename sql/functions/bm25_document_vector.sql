-- The document side of BM25 (003), stored per chunk in knowledge_chunks.bm25:
--   w(t, d) = tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))
-- indexed by bm25_lexeme_index of the lexeme, so that score(d, q) = -(bm25 <#> query_vector).
-- A function with its own search_path is never inlined, and bm25_document_vector (run for every
-- chunk written) called bm25_lexeme_index once per lexeme: with both pinned, writing BM25
-- weights took 1.9x as long. The hash is written out here instead (the same expression as
-- bm25_lexeme_index, which queries still use once per question word), so the pinned
-- search_path costs one setting per chunk, not one per lexeme.
create or replace function bm25_document_vector(doc tsvector, avgdl double precision,
                                                k1 double precision, b double precision)
returns sparsevec
language sql immutable parallel safe
set search_path = public, extensions
as $$
  with terms as (
    select (('x' || substr(md5(t.lexeme), 1, 8))::bit(32)::bigint % 999999999)::integer + 1 as i,
           coalesce(array_length(t.positions, 1), 1) as tf
    from unnest(doc) as t
  ), len as (
    select coalesce(sum(tf), 0) as dl from terms
  ), grouped as (
    select i, sum(tf)::double precision as tf from terms group by i
  )
  select coalesce(
    (select ('{' || string_agg(g.i || ':' ||
                 (g.tf * (k1 + 1) / (g.tf + k1 * (1 - b + b * len.dl / greatest(coalesce(avgdl, len.dl), 1)))),
               ',' order by g.i) || '}/999999999')::sparsevec
     from grouped g, len),
    '{}/999999999'::sparsevec)
$$;

select arc_service_role_only('function',
  'bm25_document_vector(tsvector, double precision, double precision, double precision)');
