-- The name of a large community's own vector table (arc_community_vector_index): its chunks' ids,
-- the columns the vector leg filters on, and their embeddings, under the community's HNSW index.
create or replace function arc_community_vector_table_name(community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select arc_community_object_name('arc_vectors_', community)
$$;

select arc_service_role_only('function', 'arc_community_vector_table_name(text)');
