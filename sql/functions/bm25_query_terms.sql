-- The query side of BM25 (003): one row per distinct query lexeme with its live df and idf in the
-- community, idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)) (Lucene/bm25s form). A lexeme
-- repeated in the question counts once (qtf = 1): weighting repeats lowered nDCG@10 on SciFact.
-- PL/pgSQL, not SQL, only so that its statement is planned once a session: a SQL function that is
-- not inlined (its SET keeps it from that) is planned again on every call, about 0.2 ms of each
-- hybrid_search at 100 communities (benchmarks/scale/communities/). The same statement, and
-- the cast an SQL function's result made implicitly (ln of a numeric is a numeric), written out.
-- Before communities: (query_text).
drop function if exists bm25_query_terms(text);
create or replace function bm25_query_terms(query_text text, community text)
returns table (lexeme text, idx integer, qtf integer, df bigint, idf double precision)
language plpgsql stable
set search_path = public, extensions
as $$
#variable_conflict use_column
begin
  return query
  select q.lexeme,
         bm25_lexeme_index(q.lexeme),
         1,
         coalesce(t.df, 0),
         ln(1 + (c.n_docs - coalesce(t.df, 0) + 0.5) / (coalesce(t.df, 0) + 0.5))::double precision
  -- accents folded as the documents' lexemes are (arc_fold_accents)
  from unnest(to_tsvector('english'::regconfig, arc_fold_accents(coalesce(query_text, '')))) as q
  join bm25_corpus c on c.community = bm25_query_terms.community
  left join bm25_terms t on t.community = c.community and t.lexeme = q.lexeme;
end
$$;

select arc_service_role_only('function', 'bm25_query_terms(text, text)');
