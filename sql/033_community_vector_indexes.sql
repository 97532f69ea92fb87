-- 033: every community of a knowledge base of several gets an HNSW index of its own.
--
-- hybrid_search filtered the one HNSW index on the community while it scans (pgvector 0.8's iterative
-- scans keep going until match_count rows pass). That is right while a community is much of the
-- index; a community that is a small share of it (100 communities of 10k chunks: 1%) makes the
-- scan walk past other communities' chunks, nearly all of them: at 1M chunks the vector leg
-- took 94 ms p95 for a recall@40 of 0.955 (some questions 0.575), and neither strict order, a
-- larger ef_search nor hnsw.max_scan_tuples helped (benchmarks/scale/communities/). A partial
-- index per community (`where community = '...'`) holds that community's graph alone: the
-- vector leg searches 10k chunks, not 1M: 7.5 ms p95 at recall@40 0.996 there. hybrid_search
-- reads the community's own index when there is one and the global index otherwise.
--
-- When: a knowledge base of one community keeps only the global index (it is that community's
-- index; a second one would hold the same rows). At the commit of a load that brings a second
-- community (or any later one), every community holding chunks and no index of its own gets one
-- (a deferred trigger: CREATE INDEX cannot run while the load's statement still uses the table).
-- The first community's index is built then, once; any build reads the whole table to find its
-- community's rows (6 s for 10k chunks among 1M here, the table's 1.5 GB read included), and
-- holds off other writers (never searches) until the load commits. A build that fails
-- (rights, memory) leaves the community on the global index and lets the load commit; call
-- `select arc_community_vector_indexes()` to try again. The global index answers a community
-- without an index of its own (095 drops it once every community past the size has one).
-- This file makes the trigger; the functions are sql/functions/arc_community_*.sql.

-- A community's first chunks (030 counts them in its corpus row) defer the index to the end of
-- the transaction.
drop trigger if exists bm25_corpus_community_vector_index on bm25_corpus;
create constraint trigger bm25_corpus_community_vector_index
  after update of n_docs on bm25_corpus deferrable initially deferred
  for each row when (old.n_docs = 0 and new.n_docs > 0)
  execute function arc_community_vector_indexes_on_commit();

-- A knowledge base already holding several communities gets their indexes now.
select arc_community_vector_indexes();
