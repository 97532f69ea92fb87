-- The knowledge base's HNSW index over every chunk, made if it is missing (002's, with the same m
-- and ef_construction). A knowledge base of one community reads it; one of several drops it once
-- every community past arc_community_index_min_chunks() has an index of its own
-- (arc_community_vector_indexes), and makes it again here when it is back to one community that
-- has grown past the size without an index of its own.
create or replace function arc_global_vector_index()
returns void
language plpgsql
set search_path = public, extensions
as $$
begin
  create index if not exists knowledge_chunks_embedding_hnsw
    on knowledge_chunks using hnsw (embedding vector_cosine_ops) with (m = 16, ef_construction = 64);
end
$$;

select arc_service_role_only('function', 'arc_global_vector_index()');
