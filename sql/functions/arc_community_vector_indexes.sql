-- Every community holding at least arc_community_index_min_chunks() chunks gets its vector table
-- and index, once the knowledge base holds several communities; a smaller one is read exactly
-- (hybrid_search). Returns the communities it made an index for. (A community with an index and
-- no vector leg, from before the legs were made, gets its leg, quietly; one with a partial index
-- on knowledge_chunks, as 094 made them, gets its table and index, and the partial one goes.)
-- A community whose build fails is a warning (arc_community_vector_index_built): the others still
-- get theirs, and it is read as it stands.
--
-- The global HNSW index (002) then answers no search: every community is read through its own
-- index or exactly. Yet every write of any community inserts into it, vacuum walks it, and it
-- takes its share of memory (2.6 GB at 1.3M chunks of 384 dimensions, against 50 MB for a
-- community of 44,783 at half precision: benchmarks/portfolio/results.md). So it is dropped once
-- every community past the size has its own; a failed build keeps it for that community. A
-- knowledge base back to one community gets it again when that community grows past the size
-- without an index of its own (arc_global_vector_index); until then it is read exactly.
create or replace function arc_community_vector_indexes()
returns setof text
language plpgsql
set search_path = public, extensions
as $$
declare
  c text;
begin
  for c in select b.community from bm25_corpus b
            where to_regclass(quote_ident(arc_community_object_name('knowledge_chunks_hnsw_', b.community))) is not null
            order by arc_community_vectors_slot(b.community), b.community loop
    if arc_community_vector_index_built(c) then
      return next c;
    end if;
  end loop;
  if (select count(*) from bm25_corpus where n_docs > 0) < 2 then
    if to_regclass('knowledge_chunks_embedding_hnsw') is null
       and exists (select 1 from bm25_corpus b
                    where b.n_docs >= arc_community_index_min_chunks()
                      and to_regclass(quote_ident(arc_community_vector_index_name(b.community))) is null) then
      perform arc_global_vector_index();
    end if;
    return;
  end if;
  for c in select b.community from bm25_corpus b
            where b.n_docs > 0 and b.n_docs >= arc_community_index_min_chunks()
              and to_regclass(quote_ident(arc_community_vector_index_name(b.community))) is null
            order by arc_community_vectors_slot(b.community), b.community loop
    if arc_community_vector_index_built(c) then
      return next c;
    end if;
  end loop;
  for c in select b.community from bm25_corpus b
            where to_regclass(quote_ident(arc_community_vector_index_name(b.community))) is not null
              and to_regprocedure(format('%I(vector, text[], boolean, boolean, integer)',
                                         arc_community_vector_leg_name(b.community))) is null
            order by b.community loop
    perform arc_community_vector_leg(c);
  end loop;
  if to_regclass('knowledge_chunks_embedding_hnsw') is not null
     and not exists (select 1 from bm25_corpus b
                      where b.n_docs >= arc_community_index_min_chunks()
                        and to_regclass(quote_ident(arc_community_vector_index_name(b.community))) is null) then
    drop index knowledge_chunks_embedding_hnsw;
  end if;
end
$$;

select arc_service_role_only('function', 'arc_community_vector_indexes()');
