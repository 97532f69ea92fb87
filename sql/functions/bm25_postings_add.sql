-- Add the postings of these chunks that reach their lexeme's floor (per community), then raise the
-- floor of every lexeme now holding more than its community's postings_per_lexeme. The caller holds
-- the bm25_terms rows of these lexemes (the statistics trigger before it upserted them in order).
create or replace function bm25_postings_add(ids bigint[])
returns void
language plpgsql
set search_path = public, extensions
as $$
declare
  full_list record;
  new_floor real;
begin
  for full_list in
    with added as (
      insert into bm25_postings (community, chunk_id, lexeme, weight)
      select p.community, p.chunk_id, p.lexeme, p.weight
        from (select c.community, c.id as chunk_id, t.lexeme,
                     bm25_term_weight(coalesce(array_length(t.positions, 1), 1), c.fts_length,
                                      k.avgdl_indexed, k.k1, k.b) as weight
                from knowledge_chunks c
                join bm25_corpus k on k.community = c.community,
                unnest(c.fts) t
               where c.id = any (ids)) p
        join bm25_terms s on s.community = p.community and s.lexeme = p.lexeme
       where s.floor is null or p.weight >= s.floor
      returning community, lexeme
    ), grown as (
      update bm25_terms s set kept = s.kept + g.n
        from (select community, lexeme, count(*) as n from added group by community, lexeme) g
       where s.community = g.community and s.lexeme = g.lexeme
      returning s.community, s.lexeme, s.kept
    )
    select g.community, g.lexeme, k.postings_per_lexeme as keep
      from grown g join bm25_corpus k on k.community = g.community
     where g.kept > k.postings_per_lexeme
     order by g.community, g.lexeme
  loop
    select p.weight into new_floor from bm25_postings p
     where p.community = full_list.community and p.lexeme = full_list.lexeme
     order by p.weight desc offset full_list.keep - 1 limit 1;
    with dropped as (
      delete from bm25_postings p
       where p.community = full_list.community and p.lexeme = full_list.lexeme and p.weight < new_floor
      returning 1
    )
    update bm25_terms s set floor = new_floor, kept = s.kept - (select count(*) from dropped)
     where s.community = full_list.community and s.lexeme = full_list.lexeme;
  end loop;
end
$$;

select arc_service_role_only('function', 'bm25_postings_add(bigint[])');
