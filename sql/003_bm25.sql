-- 003: Okapi BM25 inside Postgres, with nothing beyond pgvector.
--
-- Postgres's own ts_rank_cd has no inverse document frequency, so it ranks questions poorly.
-- Here BM25 is split the way an inverted index splits it:
--   * document side, stored per chunk in knowledge_chunks.bm25 (a pgvector sparsevec):
--       w(t, d) = tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))
--     indexed by a stable hash of the lexeme; tf = number of positions of the lexeme in the
--     chunk's tsvector, |d| = sum of tf (stopwords already removed by the 'english' config);
--   * query side, computed at query time from live statistics:
--       idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))            (Lucene/bm25s form)
--     so that score(d, q) = sum over query lexemes of idf * w  =  -(bm25 <#> query_vector).
--
-- N, df and the summed lengths are kept exact by statement-level triggers on every insert,
-- update, delete and truncate of knowledge_chunks, whoever makes the change (made in 030, per
-- community; their functions are sql/functions/bm25_community_stats_on_*.sql). Only avgdl inside
-- the stored weights can lag: bm25_refresh() opens a new generation when the live avgdl has moved
-- more than 5% from the one they were built with (ingestion calls it after every load).
-- This file makes the tables; the functions are in sql/functions/ (bm25_document_vector.sql, the
-- document side; bm25_query_terms.sql, the query side).
--
-- k1 = 0.9, b = 0.4 (the bm25s / Anserini defaults; measured in benchmarks/retrieval/).
-- Change them with: update bm25_corpus set k1 = .., b = ..; then `arc-retrieval db maintain --force`
-- (010_bm25_maintenance.sql rewrites the weights in steps).

create table if not exists bm25_corpus (
  id             boolean primary key default true check (id),
  n_docs         bigint not null default 0,
  total_length   bigint not null default 0,
  avgdl_indexed  double precision,          -- the avgdl the stored weights were built with
  k1             double precision not null default 0.9,
  b              double precision not null default 0.4
);
-- (030 keys this table by community instead: pasted again after it, this row is its 'default' one)
do $$
begin
  if exists (select 1 from information_schema.columns where table_schema = current_schema()
              and table_name = 'bm25_corpus' and column_name = 'id') then
    insert into bm25_corpus (id) values (true) on conflict (id) do nothing;
  end if;
end
$$;

create table if not exists bm25_terms (
  lexeme  text primary key,
  df      bigint not null
);
