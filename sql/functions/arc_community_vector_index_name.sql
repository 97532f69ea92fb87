-- The name of a community's own HNSW index, on its vector table (arc_community_vector_index).
create or replace function arc_community_vector_index_name(community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select arc_community_object_name('arc_hnsw_', community)
$$;

select arc_service_role_only('function', 'arc_community_vector_index_name(text)');
