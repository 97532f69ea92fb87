-- Constraint trigger (bm25_corpus_community_vector_index, 033, 094), deferred to the commit of a load
-- that brings a community its first chunks or past arc_community_index_min_chunks(). Whatever fails
-- there (a build, or dropping the global index: rights, memory) is a warning and lets the load
-- commit; each community is then read as it stands (its own index, the global one, or exactly).
create or replace function arc_community_vector_indexes_on_commit() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  begin
    perform arc_community_vector_indexes();
  exception when others then
    raise warning 'arc-retrieval: the communities'' vector indexes were not brought up to date (%): each '
                  'community is searched through its own index, the global index or exactly, as it stands; '
                  'run select arc_community_vector_indexes() to try again', sqlerrm;
  end;
  return null;
end
$$;

select arc_service_role_only('function', 'arc_community_vector_indexes_on_commit()');
