-- 094: an HNSW index of its own only for a community past a size (arc_community_index_min_chunks()).
--
-- 033 gave every community of a knowledge base of several an index and a vector leg function of its
-- own. A management company's portfolio holds thousands of small communities (50 to 2,000 chunks):
-- thousands of indexes and functions in the schema, planning that grows with their number (an
-- EXPLAIN at 0.26 ms with 100 communities, 14 ms with 1,000, per session and community), and an
-- index build at each new community's first load that holds off every other writer. A small
-- community's rows read exactly through the btree on community cost about what its own index does
-- (benchmarks/portfolio/results.md), so hybrid_search reads a community under the size exactly and
-- only a larger one gets its own index: made at the commit of the load that brings it past the size,
-- or that brings a knowledge base its second community (for a first community already past it).
drop trigger if exists bm25_corpus_community_vector_index on bm25_corpus;
create constraint trigger bm25_corpus_community_vector_index
  after update of n_docs on bm25_corpus deferrable initially deferred
  for each row when ((old.n_docs = 0 and new.n_docs > 0)
                     or (old.n_docs < arc_community_index_min_chunks()
                         and new.n_docs >= arc_community_index_min_chunks()))
  execute function arc_community_vector_indexes_on_commit();

-- A database of 033 keeps the indexes of its communities past the size and drops the others and
-- their legs: every document, answer and calibration stays; those communities are read exactly.
do $$
declare
  c text;
begin
  for c in select b.community from bm25_corpus b where b.n_docs < arc_community_index_min_chunks() loop
    execute format('drop function if exists %I(vector, text[], boolean, boolean, integer)',
                   arc_community_vector_leg_name(c));
    execute format('drop index if exists %I', arc_community_vector_index_name(c));
  end loop;
end
$$;
