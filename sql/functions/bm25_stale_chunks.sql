-- How many chunks (of every community, or the one named) still carry weights of an older generation.
-- Before communities: ().
drop function if exists bm25_stale_chunks();
create or replace function bm25_stale_chunks(community_name text default null)
returns bigint
language sql stable
set search_path = public, extensions
as $$
  select coalesce(sum((select count(*) from knowledge_chunks c
                        where c.community = b.community and c.bm25_generation < b.generation)), 0)::bigint
    from bm25_corpus b
   where community_name is null or b.community = community_name
$$;

select arc_service_role_only('function', 'bm25_stale_chunks(text)');
