-- Constraint trigger (bm25_corpus_community_vector_index, 033, 094), deferred to the commit of a load
-- that brings a community its first chunks or past arc_community_index_min_chunks(). A build that
-- fails leaves the community on the global index (read exactly if there is none) and lets the load
-- commit.
create or replace function arc_community_vector_indexes_on_commit() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  begin
    perform arc_community_vector_indexes();
  exception when others then
    raise warning 'arc-retrieval: no vector index of its own for a community (%): it is searched through the '
                  'global index, or exactly without one; run select arc_community_vector_indexes() to try again',
                  sqlerrm;
  end;
  return null;
end
$$;

select arc_service_role_only('function', 'arc_community_vector_indexes_on_commit()');
