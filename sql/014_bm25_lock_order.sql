-- arc: repeatable (only create-or-replace definitions: applied again whenever this file changes)
-- 014: the BM25 statistics triggers take the corpus row before any word's row.
--
-- Every statement that writes knowledge_chunks updates the one bm25_corpus row (N and the summed
-- lengths) and holds it until commit. 003's triggers took the words' bm25_terms rows first, in
-- sorted order, and the corpus row last; sorting cannot order locks across two statements of one
-- transaction, so a re-ingest (delete, then insert) could hold the corpus row and wait for a word
-- that a second writer had locked while waiting for that corpus row: a deadlock, reproduced in
-- tests/test_bm25_maintenance.py. Taking the corpus row first means a writer holds words only
-- while it holds the corpus row, so no two writers ever wait on each other's words. Writers
-- already queued on that row at commit; they now queue at their first statement instead.
--
-- A refresh step (010) and a supersession mark change no text: the update trigger returns before
-- taking anything, so they never queue behind writers here.
--
-- Words whose count reaches zero are deleted by key, as the decrement returns them (003 scanned
-- the whole of bm25_terms after every delete).

create or replace function bm25_stats_on_insert() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  perform bm25_stats_add(1, (select count(*) from new_rows), (select coalesce(sum(fts_length), 0) from new_rows));
  insert into bm25_terms (lexeme, df)
    select t.lexeme, count(*) from new_rows n, unnest(n.fts) t group by t.lexeme order by t.lexeme
  on conflict (lexeme) do update set df = bm25_terms.df + excluded.df;
  return null;
end
$$;

create or replace function bm25_stats_on_delete() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  words text[];
begin
  perform bm25_stats_add(-1, (select count(*) from old_rows), (select coalesce(sum(fts_length), 0) from old_rows));
  with decremented as (
    update bm25_terms d set df = d.df - g.n
      from (select t.lexeme, count(*) as n from old_rows o, unnest(o.fts) t group by t.lexeme) g
     where d.lexeme = g.lexeme
    returning d.lexeme, d.df
  )
  select array_agg(lexeme) into words from decremented where df <= 0;
  delete from bm25_terms where lexeme = any (words) and df <= 0;
  return null;
end
$$;

create or replace function bm25_stats_on_update() returns trigger
language plpgsql
set search_path = public, extensions
set enable_nestloop = off
as $$
declare
  words text[];
begin
  -- bm25_refresh_step() rewrites weights only; the text, and so the statistics, did not change.
  if current_setting('arc.bm25_refreshing', true) = 'on' then
    return null;
  end if;
  -- Only rows whose text changed move the statistics (marking supersession does not).
  if not exists (select 1 from old_rows o join new_rows n on n.id = o.id where o.fts is distinct from n.fts) then
    return null;
  end if;
  perform bm25_stats_add(1, 0, (select coalesce(sum(n.fts_length - o.fts_length), 0)
                                  from old_rows o join new_rows n on n.id = o.id));
  with decremented as (
    update bm25_terms d set df = d.df - g.n
      from (select t.lexeme, count(*) as n
              from old_rows o join new_rows n on n.id = o.id, unnest(o.fts) t
             where o.fts is distinct from n.fts group by t.lexeme) g
     where d.lexeme = g.lexeme
    returning d.lexeme, d.df
  )
  select array_agg(lexeme) into words from decremented where df <= 0;
  -- a word the new text has again is counted back up before the delete looks at it
  insert into bm25_terms (lexeme, df)
    select t.lexeme, count(*)
      from old_rows o join new_rows n on n.id = o.id, unnest(n.fts) t
     where o.fts is distinct from n.fts group by t.lexeme order by t.lexeme
  on conflict (lexeme) do update set df = bm25_terms.df + excluded.df;
  delete from bm25_terms where lexeme = any (words) and df <= 0;
  return null;
end
$$;

create or replace function bm25_stats_on_truncate() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  update bm25_corpus set n_docs = 0, total_length = 0, avgdl_indexed = null where id;
  delete from bm25_terms;
  return null;
end
$$;
