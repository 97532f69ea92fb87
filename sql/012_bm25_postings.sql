-- 012: impact-ordered postings, so that the full-text leg reads each word's best chunks first.
--
-- The leg used to read the chunks holding the question's rarest words through the GIN index,
-- at most fts_scan_limit of them in heap order, and score each from its stored weights. A
-- question made only of common words then scored whichever chunks came first in the heap
-- (not the best ones), and reading thousands of wide rows was most of the hybrid p95 at 100k
-- chunks and over. Here each lexeme keeps its best postings, ordered by their BM25 weight
-- w(t, d) (003) in an index the leg reads top-down: the question's words share fts_scan_limit
-- index entries, a chunk's partial score is the sum of the postings read, and only the best
-- few hundred candidates are scored exactly from their stored weights (hybrid_search).
--
-- Bounded storage: a lexeme keeps every posting whose weight is at least its floor, and the
-- floor rises so that about postings_per_lexeme (1,000) are kept; a rarer lexeme (floor null)
-- keeps all of them. Inserts and deletes keep that exact (a deleted chunk's postings go; a new
-- chunk's go in when they reach the floor). The weights are those the chunk was written with:
-- a BM25 refresh step (010) does not rewrite postings, so a posting's weight can be up to the
-- 5% avgdl drift stale; it only orders candidates, the score is always the chunk's current one.
-- After changing k1, b or postings_per_lexeme, rebuild once: select bm25_postings_rebuild();
-- (An existing knowledge base gets its postings in 030, once they carry their community.)

alter table bm25_corpus add column if not exists postings_per_lexeme integer not null default 1000;
alter table bm25_terms add column if not exists kept integer not null default 0;
alter table bm25_terms add column if not exists floor real;

create table if not exists bm25_postings (
  chunk_id  bigint not null,
  lexeme    text not null,
  weight    real not null,
  primary key (chunk_id, lexeme)
);
create index if not exists bm25_postings_impact on bm25_postings (lexeme, weight desc) include (chunk_id);

-- Named after the statistics triggers (003) so that they fire after them: the statistics
-- trigger creates and locks the bm25_terms rows these read.
drop trigger if exists knowledge_chunks_bm25_postings_insert on knowledge_chunks;
create trigger knowledge_chunks_bm25_postings_insert after insert on knowledge_chunks
  referencing new table as new_rows for each statement execute function bm25_postings_on_insert();
drop trigger if exists knowledge_chunks_bm25_postings_delete on knowledge_chunks;
create trigger knowledge_chunks_bm25_postings_delete after delete on knowledge_chunks
  referencing old table as old_rows for each statement execute function bm25_postings_on_delete();
drop trigger if exists knowledge_chunks_bm25_postings_update on knowledge_chunks;
create trigger knowledge_chunks_bm25_postings_update after update on knowledge_chunks
  referencing old table as old_rows new table as new_rows for each statement execute function bm25_postings_on_update();
drop trigger if exists knowledge_chunks_bm25_postings_truncate on knowledge_chunks;
create trigger knowledge_chunks_bm25_postings_truncate after truncate on knowledge_chunks
  for each statement execute function bm25_postings_on_truncate();

-- The rights 009 gives the other BM25 tables: the service role only.
alter table bm25_postings enable row level security;
select arc_service_role_only('table', 'bm25_postings');
