-- Rows whose text or community changed move the statistics: out of the old community with the
-- old text, into the new one with the new text. Marking supersession changes neither.
create or replace function bm25_community_stats_on_update() returns trigger
language plpgsql
set search_path = public, extensions
set enable_nestloop = off
as $$
declare
  gone_communities text[];
  gone_words text[];
begin
  if current_setting('arc.bm25_refreshing', true) = 'on' then
    return null;
  end if;
  if not exists (select 1 from old_rows o join new_rows n on n.id = o.id
                  where o.fts is distinct from n.fts or o.community <> n.community) then
    return null;
  end if;
  perform bm25_stats_add(array_agg(g.community order by g.community), array_agg(g.n order by g.community),
                         array_agg(g.len order by g.community))
     from (select m.community, sum(m.n)::bigint as n, sum(m.len)::bigint as len
             from (select o.community, -1 as n, -o.fts_length as len
                     from old_rows o join new_rows n on n.id = o.id
                    where o.fts is distinct from n.fts or o.community <> n.community
                   union all
                   select n.community, 1, n.fts_length
                     from old_rows o join new_rows n on n.id = o.id
                    where o.fts is distinct from n.fts or o.community <> n.community) m
            group by m.community) g;
  with decremented as (
    update bm25_terms d set df = d.df - g.n
      from (select o.community, t.lexeme, count(*) as n
              from old_rows o join new_rows n on n.id = o.id, unnest(o.fts) t
             where o.fts is distinct from n.fts or o.community <> n.community
             group by o.community, t.lexeme) g
     where d.community = g.community and d.lexeme = g.lexeme
    returning d.community, d.lexeme, d.df
  )
  select array_agg(community), array_agg(lexeme) into gone_communities, gone_words
    from decremented where df <= 0;
  -- a word the new text has again is counted back up before the delete looks at it
  insert into bm25_terms (community, lexeme, df)
    select n.community, t.lexeme, count(*)
      from old_rows o join new_rows n on n.id = o.id, unnest(n.fts) t
     where o.fts is distinct from n.fts or o.community <> n.community
     group by n.community, t.lexeme order by n.community, t.lexeme
  on conflict (community, lexeme) do update set df = bm25_terms.df + excluded.df;
  delete from bm25_terms d
   using unnest(gone_communities, gone_words) as z(community, lexeme)
   where d.community = z.community and d.lexeme = z.lexeme and d.df <= 0;
  return null;
end
$$;

select arc_service_role_only('function', 'bm25_community_stats_on_update()');
