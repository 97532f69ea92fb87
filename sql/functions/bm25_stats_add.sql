-- Create missing corpus rows, lock these communities' rows in name order, move N and lengths.
-- Before communities: (delta, rows_changed, length_changed).
drop function if exists bm25_stats_add(integer, bigint, bigint);
create or replace function bm25_stats_add(communities text[], docs bigint[], lengths bigint[])
returns void
language plpgsql
set search_path = public, extensions
as $$
begin
  if communities is null or cardinality(communities) = 0 then
    return;
  end if;
  insert into bm25_corpus (community)
    select c from unnest(communities) c order by c
  on conflict (community) do nothing;
  perform 1 from bm25_corpus b where b.community = any (communities) order by b.community for update;
  update bm25_corpus b
     set n_docs = b.n_docs + d.docs, total_length = b.total_length + d.len
    from unnest(communities, docs, lengths) as d(community, docs, len)
   where b.community = d.community;
end
$$;

select arc_service_role_only('function', 'bm25_stats_add(text[], bigint[], bigint[])');
