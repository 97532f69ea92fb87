-- Make the community's index if it has none (same opclass, m and ef_construction as 002's), and
-- its vector leg.
create or replace function arc_community_vector_index(community text)
returns text
language plpgsql
set search_path = public, extensions
as $$
declare
  name text := arc_community_vector_index_name(community);
begin
  if to_regclass(quote_ident(name)) is null then
    execute format('create index %I on knowledge_chunks using hnsw (embedding vector_cosine_ops) '
                   'with (m = 16, ef_construction = 64) where community = %L', name, community);
  end if;
  perform arc_community_vector_leg(community);
  return name;
end
$$;

select arc_service_role_only('function', 'arc_community_vector_index(text)');
