-- How many chunks a community of a knowledge base of several holds before it gets an HNSW index
-- and vector leg of its own (033, 094). Below it, hybrid_search reads the community's rows exactly
-- through the btree indexes that lead with the community: 0.6 ms for 500 chunks, 2.1 ms p50 for
-- 4,000 and 7.6 ms for 8,000 among 300k (docs/communities.md), against an index, a function and
-- their planning per community, which grows with the number of communities. An admin may move it
-- for a database: alter database ... set arc.community_index_min_chunks = '...'.
create or replace function arc_community_index_min_chunks()
returns integer
language sql stable parallel safe
set search_path = public, extensions
as $$
  select coalesce(nullif(current_setting('arc.community_index_min_chunks', true), '')::integer, 4000)
$$;

select arc_service_role_only('function', 'arc_community_index_min_chunks()');
