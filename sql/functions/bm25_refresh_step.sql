-- Rewrite up to max_rows chunks of an older generation, in the first community (by name, or the
-- one named) that has any. Returns how many it rewrote (0: all up to date, or held elsewhere).
-- Before communities: (max_rows).
drop function if exists bm25_refresh_step(integer);
create or replace function bm25_refresh_step(max_rows integer default 2000, community_name text default null)
returns integer
language plpgsql
set search_path = public, extensions
as $$
declare
  corpus bm25_corpus;
  rewritten integer;
begin
  for corpus in select * from bm25_corpus b
                 where community_name is null or b.community = community_name order by b.community loop
    continue when not exists (select 1 from knowledge_chunks c
                               where c.community = corpus.community and c.bm25_generation < corpus.generation);
    -- The version row first (010): a step waits, if at all, before it holds anything.
    perform knowledge_base_bump(array[corpus.community]);
    perform set_config('arc.bm25_refreshing', 'on', true);
    with stale as (
      select c.id from knowledge_chunks c
       where c.community = corpus.community and c.bm25_generation < corpus.generation
       order by c.bm25_generation
       limit max_rows
         for update skip locked
    )
    update knowledge_chunks c
       set bm25 = bm25_document_vector(c.fts, corpus.avgdl_indexed, corpus.k1, corpus.b),
           bm25_generation = corpus.generation
      from stale
     where c.id = stale.id;
    get diagnostics rewritten = row_count;
    perform set_config('arc.bm25_refreshing', 'off', true);
    return rewritten;
  end loop;
  return 0;
end
$$;

select arc_service_role_only('function', 'bm25_refresh_step(integer, text)');
