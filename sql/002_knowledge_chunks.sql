-- 002: the chunk table and its indexes.
-- The embedding size is written as vector(1536) (text-embedding-3-large with dimensions=1536).
-- For another model print this file with `arc-retrieval db sql --dim N`.

create table if not exists knowledge_chunks (
  id             bigint generated always as identity primary key,
  document_id    text not null,
  document_name  text not null,
  document_type  text not null check (document_type in
                   ('design_guidelines', 'ccr', 'response_letter', 'application_form', 'other')),
  section_path   text not null default '',   -- e.g. 'Chapter 4 > 4.2 > Fencing'
  page_number    integer,                     -- 1-based page of the chunk's start; null for text
  chunk_index    integer not null,            -- order within the document, from 0
  is_binding     boolean not null default true,
  superseded_by  text,                        -- document_id of the superseding document
  content        text not null,
  token_count    integer not null,
  metadata       jsonb not null default '{}'::jsonb,
  embedding      vector(1536),
  fts            tsvector generated always as (arc_fts_document(section_path, content)) stored,
  -- BM25 document side (see 003_bm25.sql): saturated term weights as a sparse vector and the
  -- document length in lexemes. Filled by a trigger; never written by clients.
  bm25           sparsevec,
  fts_length     integer not null default 0,
  created_at     timestamptz not null default now(),
  constraint knowledge_chunks_document_chunk unique (document_id, chunk_index)
);

-- Keep the BM25 weights in the row itself (pgvector stores sparsevec EXTERNAL by default): the
-- full-text leg reads this column for every matching chunk, and a TOAST lookup per row cost about
-- 10% of its p95 at 100k chunks. The wide columns (content, fts, embedding) go out of line instead.
alter table knowledge_chunks alter column bm25 set storage main;

-- HNSW, cosine. m=16, ef_construction=64 are pgvector's defaults: recall@40 0.99 at 10k chunks
-- and about 0.9 at 100k on the (deliberately clustered) synthetic data of benchmarks/scale/, at
-- a build time of 18 s per 100k; raise ef_construction (or m to 24) for more recall at scale. The query side sets hnsw.ef_search itself (hybrid_search).
create index if not exists knowledge_chunks_embedding_hnsw
  on knowledge_chunks using hnsw (embedding vector_cosine_ops) with (m = 16, ef_construction = 64);
-- (document_id, chunk_index) is indexed by the unique constraint above.
create index if not exists knowledge_chunks_document_type on knowledge_chunks (document_type);
