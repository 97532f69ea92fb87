-- Every chunk's postings from scratch, per community (an existing knowledge base without postings;
-- after a change of k1, b or postings_per_lexeme). One statement over the whole table: run it from
-- psql, not under the worker's statement timeout, on a large corpus.
create or replace function bm25_postings_rebuild()
returns bigint
language plpgsql
set search_path = public, extensions
as $$
declare
  kept_rows bigint;
begin
  truncate bm25_postings;
  insert into bm25_postings (community, chunk_id, lexeme, weight)
  select community, chunk_id, lexeme, weight from (
    select c.community, c.id as chunk_id, t.lexeme, w.weight, k.postings_per_lexeme as keep,
           rank() over (partition by c.community, t.lexeme order by w.weight desc) as place
      from knowledge_chunks c
      join bm25_corpus k on k.community = c.community
     cross join lateral unnest(c.fts) t
     cross join lateral (select bm25_term_weight(coalesce(array_length(t.positions, 1), 1), c.fts_length,
                                                 k.avgdl_indexed, k.k1, k.b) as weight) w
  ) ranked
  where place <= keep;
  get diagnostics kept_rows = row_count;
  update bm25_terms set kept = 0, floor = null where kept <> 0 or floor is not null;
  update bm25_terms s
     set kept = k.n, floor = case when k.n < s.df then k.lowest end
    from (select community, lexeme, count(*) as n, min(weight) as lowest
            from bm25_postings group by community, lexeme) k
   where s.community = k.community and s.lexeme = k.lexeme;
  return kept_rows;
end
$$;

select arc_service_role_only('function', 'bm25_postings_rebuild()');
