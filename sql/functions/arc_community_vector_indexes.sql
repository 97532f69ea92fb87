-- Every community holding at least arc_community_index_min_chunks() chunks gets its index, once the
-- knowledge base holds several communities; a smaller one is read exactly (hybrid_search). Returns
-- the communities it made an index for. (A community with an index and no vector leg,
-- from before the legs were made, gets its leg, quietly.)
create or replace function arc_community_vector_indexes()
returns setof text
language plpgsql
set search_path = public, extensions
as $$
declare
  c text;
begin
  if (select count(*) from bm25_corpus where n_docs > 0) < 2 then
    return;
  end if;
  for c in select b.community from bm25_corpus b
            where b.n_docs > 0 and b.n_docs >= arc_community_index_min_chunks()
              and to_regclass(quote_ident(arc_community_vector_index_name(b.community))) is null
            order by b.community loop
    perform arc_community_vector_index(c);
    return next c;
  end loop;
  for c in select b.community from bm25_corpus b
            where to_regclass(quote_ident(arc_community_vector_index_name(b.community))) is not null
              and to_regprocedure(format('%I(vector, text[], boolean, boolean, integer)',
                                         arc_community_vector_leg_name(b.community))) is null
            order by b.community loop
    perform arc_community_vector_leg(c);
  end loop;
end
$$;

select arc_service_role_only('function', 'arc_community_vector_indexes()');
