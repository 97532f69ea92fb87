-- arc_community_vector_index for one community of arc_community_vector_indexes, on its own: a build
-- that fails (rights, memory, a name taken) is a warning naming the community and undoes only its
-- own work, so the other communities still get theirs; that one is read as it stands (its own
-- index, the global one, or exactly). True when it was made.
create or replace function arc_community_vector_index_built(community text)
returns boolean
language plpgsql
set search_path = public, extensions
as $$
begin
  perform arc_community_vector_index(community);
  return true;
exception when others then
  raise warning 'arc-retrieval: no vector index of its own for community % (%): it is searched through the '
                'global index, or exactly without one; run select arc_community_vector_indexes() to try again',
                community, sqlerrm;
  return false;
end
$$;

select arc_service_role_only('function', 'arc_community_vector_index_built(text)');
