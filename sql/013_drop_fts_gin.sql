-- 013: the GIN index on knowledge_chunks.fts goes. Nothing reads `fts @@` since the full-text
-- leg reads the impact-ordered postings (012_bm25_postings.sql); the index still cost every
-- insert and, at 1M chunks, 338 MB of memory the postings and HNSW index want
-- (benchmarks/scale/). The fts column stays: the BM25 triggers read its lexemes.
drop index if exists knowledge_chunks_fts_gin;
