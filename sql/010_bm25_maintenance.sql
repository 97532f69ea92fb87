-- 010: BM25 maintenance that never fails or blocks ingestion, at any corpus size.
--
-- The stored weights depend on the average chunk length (avgdl). 003's bm25_refresh() rewrote
-- every chunk in one statement when avgdl drifted by 5%: at 15k chunks that outlasted the
-- worker's 5 s statement timeout, so every later ingest failed the same way, and holding
-- bm25_corpus while it rewrote deadlocked with a concurrent re-ingest.
--
-- Now a drift only opens a new generation (one row, at once); the chunks are rewritten in small
-- batches, each its own transaction, by bm25_refresh_step(). A step skips rows another
-- transaction holds, takes no lock on bm25_corpus, and takes the knowledge-base version row
-- first, so it never waits while holding chunk rows: no deadlock with ingests or deletes. Until
-- the last step, chunks of the older generation score with the avgdl they were written with (at
-- most 5% off; benchmarks/bm25_staleness/ measures what that costs). Ingestion runs steps for a
-- bounded time after each load; `arc-retrieval db maintain` (or pg_cron calling
-- bm25_refresh_step) finishes the rest. The functions: sql/functions/bm25_refresh.sql,
-- bm25_refresh_step.sql, bm25_stale_chunks.sql.

alter table bm25_corpus add column if not exists generation integer not null default 0;
alter table knowledge_chunks add column if not exists bm25_generation integer not null default 0;
create index if not exists knowledge_chunks_bm25_generation on knowledge_chunks (bm25_generation);
