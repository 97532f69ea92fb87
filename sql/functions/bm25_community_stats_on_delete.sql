-- Statement trigger (knowledge_chunks_bm25_delete, 030): the deleted chunks leave their communities'
-- statistics, corpus rows first; words whose count reaches zero are deleted by key.
create or replace function bm25_community_stats_on_delete() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  gone_communities text[];
  gone_words text[];
begin
  perform bm25_stats_add(array_agg(g.community order by g.community), array_agg(-g.n order by g.community),
                         array_agg(-g.len order by g.community))
     from (select community, count(*) as n, coalesce(sum(fts_length), 0) as len
             from old_rows group by community) g;
  with decremented as (
    update bm25_terms d set df = d.df - g.n
      from (select o.community, t.lexeme, count(*) as n from old_rows o, unnest(o.fts) t
             group by o.community, t.lexeme) g
     where d.community = g.community and d.lexeme = g.lexeme
    returning d.community, d.lexeme, d.df
  )
  select array_agg(community), array_agg(lexeme) into gone_communities, gone_words
    from decremented where df <= 0;
  delete from bm25_terms d
   using unnest(gone_communities, gone_words) as z(community, lexeme)
   where d.community = z.community and d.lexeme = z.lexeme and d.df <= 0;
  return null;
end
$$;

select arc_service_role_only('function', 'bm25_community_stats_on_delete()');
