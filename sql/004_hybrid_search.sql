-- 004: hybrid_search, the one function every retrieval goes through (direct Postgres and
-- Supabase RPC alike).
--
-- Two legs, each filtered the same way and each bounded to match_count rows:
--   vector leg  : HNSW cosine search; vector_score = cosine similarity.
--   full-text leg: chunks matching the question's selective lexemes (OR, GIN index), ranked by
--                  BM25 (003_bm25.sql); fts_score = BM25 divided by the score of an average-length
--                  chunk holding every query lexeme once (lexemes absent from the corpus
--                  included), capped at 1, so it is comparable across queries.
-- Fused by FULL OUTER JOIN:
--   'weighted' : weighted mean of each leg's score min-max normalised over the candidate list
--                (a leg that missed the chunk counts 0). Measured better than absolute scores
--                and than RRF on SciFact (benchmarks/retrieval/);
--   'rrf'      : sum of weight / (rrf_k + rank) over the legs a chunk appears in.
-- Without an embedding (the embedder failed) only the full-text leg runs and fts_weight is 1.
-- expansion_text: extra words for the full-text leg only (synonyms), weighted expansion_weight.
--
-- Bounded work on common words: lexemes found in more than fts_max_df_ratio of all chunks (and
-- in more than fts_min_df_cutoff chunks) do not select candidates (they still score them). Of
-- the others, the most telling select, as many as fit in fts_scan_limit chunks together, and at
-- most fts_scan_limit matching rows are read; those that pass the filters are scored. Below that
-- many matches (most questions up to ~100k chunks) the leg is exact; above it, the chunks read
-- are those with the question's rarest words (benchmarks/fts_selection/), and a narrow filter
-- leaves the vector leg to find most of its candidates. The function sets its own
-- hnsw.ef_search and, on pgvector >= 0.8, iterative index scans, so a filtered vector leg still
-- fills match_count rows.
-- arc: repeatable (only create-or-replace definitions: applied again whenever this file changes)
-- The signature before expansion_text (0.1.0): dropped so named calls stay unambiguous.
drop function if exists hybrid_search(text, vector, integer, double precision, double precision, text, integer,
                                      text[], boolean, boolean, integer, double precision, integer, integer);
create or replace function hybrid_search(
  query_text          text,
  query_embedding     vector default null,
  match_count         integer default 40,
  vector_weight       double precision default 0.7,
  fts_weight          double precision default 0.3,
  fusion              text default 'weighted',
  rrf_k               integer default 60,
  document_types      text[] default null,
  binding_only        boolean default false,
  include_superseded  boolean default false,
  ef_search           integer default null,
  fts_max_df_ratio    double precision default 0.01,
  fts_min_df_cutoff   integer default 1000,
  fts_scan_limit      integer default 5000,
  expansion_text      text default null,
  expansion_weight    double precision default 0.5
)
returns table (
  id bigint, document_id text, document_name text, document_type text, section_path text,
  page_number integer, chunk_index integer, is_binding boolean, superseded_by text,
  content text, token_count integer, metadata jsonb,
  vector_score double precision, fts_score double precision, bm25_score double precision,
  fused_score double precision, vector_rank integer, fts_rank integer
)
language plpgsql
set search_path = public, extensions
set statement_timeout = '5s'
-- The cost model does not see that fts and content are TOASTed: left alone it picks a sequential
-- scan (detoasting every row) over the GIN bitmap once a query matches a fifth of the table.
set enable_seqscan = off
as $$
#variable_conflict use_column
declare
  qvec        sparsevec;
  idf_mass    double precision;
  match_query tsquery;
  n_docs      bigint;
  vw          double precision := coalesce(vector_weight, 0.7);
  fw          double precision := coalesce(fts_weight, 0.3);
begin
  if match_count is null or match_count < 1 or match_count > 1000 then
    raise exception 'match_count must be between 1 and 1000' using errcode = '22023';
  end if;
  if fusion is null or fusion not in ('weighted', 'rrf') then
    raise exception 'fusion must be weighted or rrf' using errcode = '22023';
  end if;
  if query_embedding is null then
    vw := 0;
    fw := 1;
  end if;

  perform set_config('hnsw.ef_search',
                     least(greatest(coalesce(ef_search, 3 * match_count), match_count, 100), 1000)::text, true);
  begin
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
  exception when others then
    null;  -- pgvector < 0.8: no iterative scans; the larger ef_search above still helps
  end;

  select c.n_docs into n_docs from bm25_corpus c where c.id;

  -- One pass over the question's lexemes gives both the BM25 query vector and the match query.
  with all_terms as (
    select * from bm25_query_terms(query_text)
  ), terms as (
    select t.lexeme, t.idx, t.df, t.idf * t.qtf as w from all_terms t where t.df > 0
    union all
    -- the documents' words for the question's (worker/vocabulary.py): they find and score
    -- chunks at expansion_weight, and do not count in the normaliser below
    select e.lexeme, e.idx, e.df, e.idf * e.qtf * coalesce(expansion_weight, 0.5)
    from bm25_query_terms(expansion_text) e
    where e.df > 0 and e.lexeme not in (select lexeme from all_terms)
  ), by_index as (
    select idx, sum(w) as w from terms group by idx
  ), selective as (
    select lexeme, df, w from terms where df <= greatest(fts_max_df_ratio * n_docs, fts_min_df_cutoff)
  ), chosen as (
    -- The most telling words first (highest weight: rarest, not an expansion), as many as the
    -- leg may read all the chunks of (their df summed within fts_scan_limit; always the first).
    -- When a question matches more chunks than that, the chunks read are those holding its
    -- rarest words, not whichever come first in the heap (which dropped the newest documents).
    select lexeme from (
      select lexeme, sum(df) over (order by w desc, lexeme) as reads,
             row_number() over (order by w desc, lexeme) as n
      from selective
    ) r
    where r.reads <= fts_scan_limit or r.n = 1
    union all
    -- every lexeme is common: fall back to the two rarest
    select lexeme from (select lexeme from terms order by df, lexeme limit 2) r
     where not exists (select 1 from selective)
  )
  select (select ('{' || string_agg(idx || ':' || w, ',' order by idx) || '}/999999999')::sparsevec
            from by_index),
         -- the normaliser counts every query lexeme, found in the corpus or not: a question
         -- whose one matching word is "2019" is not a full match ("who won the world series
         -- in 2019" scored fts 1.0 against governing documents when only found words counted)
         (select sum(idf * qtf) from all_terms),
         (select string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '\''') || '''', ' | ')::tsquery
            from chosen)
    into qvec, idf_mass, match_query;

  return query
  with vector_leg as (
    select v.id, v.score, (row_number() over (order by v.distance))::integer as rank
    from (
      select c.id, c.embedding <=> query_embedding as distance, 1 - (c.embedding <=> query_embedding) as score
      from knowledge_chunks c
      where query_embedding is not null
        -- an expression, not the bare column: at 1M chunks the planner otherwise reads every
        -- chunk of the type through the btree and sorts them (90-200 ms) instead of filtering
        -- during the HNSW scan (iterative scans keep filling the list)
        and (document_types is null or (c.document_type || '') = any (document_types))
        and (not binding_only or c.is_binding)
        and (include_superseded or c.superseded_by is null)
      order by c.embedding <=> query_embedding
      limit match_count
    ) v
  ), fts_leg as (
    select s.id, -(s.bm25 <#> qvec) as score,
           (row_number() over (order by s.bm25 <#> qvec, s.id))::integer as rank
    from (
      -- The filters apply to the rows read, not while reading: reading on until fts_scan_limit
      -- rows pass a filter that keeps 30% of chunks reads 3x the heap pages (at 1M chunks,
      -- p95 43 ms warm, over 150 ms cold, against 26 ms unfiltered; benchmarks/scale/).
      select c.id, c.bm25, c.document_type, c.is_binding, c.superseded_by
      from knowledge_chunks c
      where match_query is not null
        and c.fts @@ match_query
      limit fts_scan_limit
    ) s
    where (document_types is null or s.document_type = any (document_types))
      and (not binding_only or s.is_binding)
      and (include_superseded or s.superseded_by is null)
    order by s.bm25 <#> qvec, s.id
    limit match_count
  ), joined as (
    select coalesce(v.id, f.id) as id,
           v.score as vector_score,
           case when f.score is not null then least(f.score / nullif(idf_mass, 0), 1.0) end as fts_score,
           f.score as bm25_score,
           v.rank as vector_rank,
           f.rank as fts_rank
    from vector_leg v
    full outer join fts_leg f on f.id = v.id
  ), normalised as (
    -- min-max within this candidate list; a chunk missing from a leg gets 0 for it
    select j.*,
           case when j.vector_score is null then 0.0 else coalesce(
             (j.vector_score - min(j.vector_score) over ()) /
             nullif(max(j.vector_score) over () - min(j.vector_score) over (), 0), 1.0) end as vector_norm,
           case when j.bm25_score is null then 0.0 else coalesce(
             (j.bm25_score - min(j.bm25_score) over ()) /
             nullif(max(j.bm25_score) over () - min(j.bm25_score) over (), 0), 1.0) end as fts_norm
    from joined j
  )
  select c.id, c.document_id, c.document_name, c.document_type, c.section_path,
         c.page_number, c.chunk_index, c.is_binding, c.superseded_by,
         c.content, c.token_count, c.metadata,
         n.vector_score, n.fts_score, n.bm25_score,
         case when fusion = 'rrf' then
                coalesce(vw / (rrf_k + n.vector_rank), 0) + coalesce(fw / (rrf_k + n.fts_rank), 0)
              else
                (vw * n.vector_norm + fw * n.fts_norm) / nullif(vw + fw, 0)
         end as fused_score,
         n.vector_rank, n.fts_rank
  from normalised n
  join knowledge_chunks c on c.id = n.id
  order by 16 desc, 1;
end
$$;
