-- Statement trigger (knowledge_chunks_bm25_insert, 030): N, the summed lengths and the document
-- frequencies of the new chunks' communities. The corpus rows first (bm25_stats_add, in name
-- order), then the words in sorted order: one lock order for every writer, so no deadlock.
create or replace function bm25_community_stats_on_insert() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  perform bm25_stats_add(array_agg(g.community order by g.community), array_agg(g.n order by g.community),
                         array_agg(g.len order by g.community))
     from (select community, count(*) as n, coalesce(sum(fts_length), 0) as len
             from new_rows group by community) g;
  insert into bm25_terms (community, lexeme, df)
    select n.community, t.lexeme, count(*) from new_rows n, unnest(n.fts) t
     group by n.community, t.lexeme order by n.community, t.lexeme
  on conflict (community, lexeme) do update set df = bm25_terms.df + excluded.df;
  return null;
end
$$;

select arc_service_role_only('function', 'bm25_community_stats_on_insert()');
