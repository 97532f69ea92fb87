-- 030: several communities (associations) in one knowledge base.
--
-- Every chunk carries a community key, and everything BM25 counts is counted per community: N,
-- the summed lengths and avgdl (bm25_corpus, one row per community), the document frequencies
-- (bm25_terms) and the impact-ordered postings (bm25_postings). Sister associations' near-identical
-- bylaws then never share one ranking: loading one community moves no number another ranks with.
-- The knowledge-base version (008) is per community too, so a load invalidates only its own
-- community's cached searches. hybrid_search applies the community inside both legs (031).
--
-- An existing single-community database upgrades in place: every row it holds gets the
-- community 'default' (a column with a constant default costs no table rewrite), its statistics
-- become that community's row, nothing is re-ingested. The lock order of 014 is kept: a writer
-- takes its communities' corpus rows first (in name order), then their words, then their
-- version rows; a refresh step takes its community's version row first and never a corpus row.
--
-- Pasted again with every other file (`db sql`), it changes nothing: each step checks what is
-- there. The statistics triggers run functions of new names (bm25_community_stats_*), so that
-- 014 (repeatable), applied again after this file, only redefines functions no trigger calls.

-- ---- the key ------------------------------------------------------------------------------------
alter table knowledge_chunks add column if not exists community text not null default 'default';
do $$
begin
  if not exists (select 1 from pg_constraint where conname = 'knowledge_chunks_community_name') then
    alter table knowledge_chunks add constraint knowledge_chunks_community_name
      check (community ~ '^[a-z0-9][a-z0-9_-]{0,62}$');
  end if;
  -- Two associations may both have "bylaws": a document is named within its community.
  if not exists (select 1 from pg_constraint
                  where conname = 'knowledge_chunks_document_chunk' and cardinality(conkey) = 3) then
    alter table knowledge_chunks drop constraint if exists knowledge_chunks_document_chunk;
    alter table knowledge_chunks add constraint knowledge_chunks_document_chunk
      unique (community, document_id, chunk_index);
  end if;
end
$$;
drop index if exists knowledge_chunks_bm25_generation;
create index if not exists knowledge_chunks_community_generation on knowledge_chunks (community, bm25_generation);

-- ---- per-community statistics ------------------------------------------------------------------
alter table bm25_corpus add column if not exists community text not null default 'default';
alter table bm25_corpus drop column if exists id;  -- its primary key and check go with it
alter table bm25_corpus alter column community drop default;

alter table bm25_terms add column if not exists community text not null default 'default';
alter table bm25_terms alter column community drop default;

alter table bm25_postings add column if not exists community text not null default 'default';
alter table bm25_postings alter column community drop default;
drop index if exists bm25_postings_impact;
create index if not exists bm25_postings_community_impact
  on bm25_postings (community, lexeme, weight desc) include (chunk_id);

alter table knowledge_base_state add column if not exists community text not null default 'default';
alter table knowledge_base_state drop column if exists id;
alter table knowledge_base_state alter column community drop default;

do $$
begin
  if not exists (select 1 from pg_constraint where conname = 'bm25_corpus_pkey') then
    alter table bm25_corpus add primary key (community);
  end if;
  if not exists (select 1 from pg_constraint where conname = 'bm25_terms_pkey' and cardinality(conkey) = 2) then
    alter table bm25_terms drop constraint if exists bm25_terms_pkey;
    alter table bm25_terms add primary key (community, lexeme);
  end if;
  if not exists (select 1 from pg_constraint where conname = 'knowledge_base_state_pkey') then
    alter table knowledge_base_state add primary key (community);
  end if;
end
$$;

-- The 'default' rows stay even in an empty database: a community without chunks is no
-- community to a client (knowledge_communities below), and tuning k1 and b there keeps working.

-- The communities a client may name: those holding chunks.
create or replace view knowledge_communities as
select b.community, b.n_docs as chunks, s.version, s.changed_at
from bm25_corpus b
left join knowledge_base_state s on s.community = b.community
where b.n_docs > 0;

-- The same list for Supabase's RPC route (PostgREST calls functions; the worker reads no table there).
create or replace function community_names()
returns table (community text)
language sql stable
set search_path = public, extensions
as $$
  select k.community from knowledge_communities k order by k.community
$$;

-- ---- statistics triggers (003, 014), per community ---------------------------------------------
drop function if exists bm25_stats_add(integer, bigint, bigint);

-- Create missing corpus rows, lock these communities' rows in name order, move N and lengths.
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

create or replace function bm25_chunk_weights() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  doc tsvector := arc_fts_document(new.section_path, new.content);
  corpus bm25_corpus;
begin
  select * into corpus from bm25_corpus where community = new.community;
  if not found then  -- a community's first chunk: its row, with the default k1 and b
    insert into bm25_corpus (community) values (new.community) on conflict (community) do nothing;
    select * into corpus from bm25_corpus where community = new.community;
  end if;
  new.fts_length := bm25_document_length(doc);
  new.bm25 := bm25_document_vector(doc, corpus.avgdl_indexed, corpus.k1, corpus.b);
  new.bm25_generation := corpus.generation;
  return new;
end
$$;

-- A chunk moved to another community is weighted with that community's avgdl.
drop trigger if exists knowledge_chunks_bm25_weights on knowledge_chunks;
create trigger knowledge_chunks_bm25_weights
  before insert or update of section_path, content, community on knowledge_chunks
  for each row execute function bm25_chunk_weights();

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

create or replace function bm25_community_stats_on_truncate() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  update bm25_corpus set n_docs = 0, total_length = 0, avgdl_indexed = null;
  delete from bm25_terms;
  return null;
end
$$;

drop trigger if exists knowledge_chunks_bm25_insert on knowledge_chunks;
create trigger knowledge_chunks_bm25_insert after insert on knowledge_chunks
  referencing new table as new_rows for each statement execute function bm25_community_stats_on_insert();
drop trigger if exists knowledge_chunks_bm25_delete on knowledge_chunks;
create trigger knowledge_chunks_bm25_delete after delete on knowledge_chunks
  referencing old table as old_rows for each statement execute function bm25_community_stats_on_delete();
drop trigger if exists knowledge_chunks_bm25_update on knowledge_chunks;
create trigger knowledge_chunks_bm25_update after update on knowledge_chunks
  referencing old table as old_rows new table as new_rows
  for each statement execute function bm25_community_stats_on_update();
drop trigger if exists knowledge_chunks_bm25_truncate on knowledge_chunks;
create trigger knowledge_chunks_bm25_truncate after truncate on knowledge_chunks
  for each statement execute function bm25_community_stats_on_truncate();

-- ---- maintenance (010), per community ----------------------------------------------------------
drop function if exists bm25_refresh(boolean);
drop function if exists bm25_refresh_step(integer);
drop function if exists bm25_stale_chunks();
drop function if exists bm25_seed_avgdl(text[], text[]);

-- Open a new generation in every community (or the one named) whose live avgdl drifted more
-- than 5% (or always, with force). Returns whether it opened any.
create or replace function bm25_refresh(force boolean default false, community_name text default null)
returns boolean
language plpgsql
set search_path = public, extensions
as $$
declare
  opened boolean := false;
  corpus bm25_corpus;
  live double precision;
begin
  for corpus in select * from bm25_corpus b
                 where community_name is null or b.community = community_name order by b.community loop
    live := corpus.total_length::double precision / nullif(corpus.n_docs, 0);
    continue when live is null;
    continue when not force and corpus.avgdl_indexed is not null
                  and abs(live - corpus.avgdl_indexed) <= 0.05 * corpus.avgdl_indexed;
    update bm25_corpus b set avgdl_indexed = live, generation = b.generation + 1
     where b.community = corpus.community;
    opened := true;
  end loop;
  return opened;
end
$$;

-- Rewrite up to max_rows chunks of an older generation, in the first community (by name, or the
-- one named) that has any. Returns how many it rewrote (0: all up to date, or held elsewhere).
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

-- Before a community's first load, take its avgdl from the documents about to be loaded.
create or replace function bm25_seed_avgdl(sections text[], contents text[], community_name text)
returns void
language sql
set search_path = public, extensions
as $$
  insert into bm25_corpus (community, avgdl_indexed)
  select community_name, avg(bm25_document_length(arc_fts_document(s, c)))
    from unnest(sections, contents) as t(s, c)
  on conflict (community) do update set avgdl_indexed = excluded.avgdl_indexed
   where bm25_corpus.n_docs = 0;
$$;

-- ---- postings (012), per community -------------------------------------------------------------
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

create or replace function bm25_postings_remove(ids bigint[])
returns void
language sql
set search_path = public, extensions
as $$
  with gone as (
    delete from bm25_postings p where p.chunk_id = any (ids) returning community, lexeme
  )
  update bm25_terms s set kept = s.kept - g.n
    from (select community, lexeme, count(*) as n from gone group by community, lexeme) g
   where s.community = g.community and s.lexeme = g.lexeme;
$$;

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

-- A chunk moved to another community takes its postings along (012 looked at the text only).
create or replace function bm25_postings_on_update() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  changed bigint[];
begin
  if current_setting('arc.bm25_refreshing', true) = 'on' then
    return null;
  end if;
  select array_agg(n.id) into changed
    from old_rows o join new_rows n on n.id = o.id
   where o.fts is distinct from n.fts or o.community <> n.community;
  if changed is not null then
    perform bm25_postings_remove(changed);
    perform bm25_postings_add(changed);
  end if;
  return null;
end
$$;

-- ---- the knowledge-base version (008), per community -------------------------------------------
-- Move the version of these communities (rows created as needed, locked in name order).
create or replace function knowledge_base_bump(communities text[])
returns void
language plpgsql
set search_path = public, extensions
as $$
begin
  if communities is null or cardinality(communities) = 0 then
    return;
  end if;
  insert into knowledge_base_state (community)
    select c from unnest(communities) c order by c
  on conflict (community) do nothing;
  perform 1 from knowledge_base_state s where s.community = any (communities) order by s.community for update;
  update knowledge_base_state s set version = s.version + 1, changed_at = now()
   where s.community = any (communities);
end
$$;

-- One function for the three row-carrying events (each trigger has its own transition tables).
create or replace function knowledge_base_touch_communities() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  if current_setting('arc.bm25_refreshing', true) = 'on' then
    return null;  -- a refresh step already moved its community's version, before taking rows
  end if;
  if tg_op = 'INSERT' then
    perform knowledge_base_bump(array(select distinct community from new_rows order by 1));
  elsif tg_op = 'DELETE' then
    perform knowledge_base_bump(array(select distinct community from old_rows order by 1));
  elsif tg_op = 'UPDATE' then
    perform knowledge_base_bump(array(select community from old_rows union select community from new_rows
                                      order by 1));
  else  -- TRUNCATE: every community
    perform knowledge_base_bump(array(select community from knowledge_base_state order by 1));
  end if;
  return null;
end
$$;

-- Named after the BM25 triggers, so they fire after them (corpus rows, words, then versions).
drop trigger if exists knowledge_chunks_version on knowledge_chunks;
drop trigger if exists knowledge_chunks_version_insert on knowledge_chunks;
drop trigger if exists knowledge_chunks_version_update on knowledge_chunks;
drop trigger if exists knowledge_chunks_version_delete on knowledge_chunks;
drop trigger if exists knowledge_chunks_version_truncate on knowledge_chunks;
create trigger knowledge_chunks_version_insert after insert on knowledge_chunks
  referencing new table as new_rows for each statement execute function knowledge_base_touch_communities();
create trigger knowledge_chunks_version_update after update on knowledge_chunks
  referencing old table as old_rows new table as new_rows for each statement execute function knowledge_base_touch_communities();
create trigger knowledge_chunks_version_delete after delete on knowledge_chunks
  referencing old table as old_rows for each statement execute function knowledge_base_touch_communities();
create trigger knowledge_chunks_version_truncate after truncate on knowledge_chunks
  for each statement execute function knowledge_base_touch_communities();

-- The whole knowledge base's counter (any community's change moves it), as before; and one
-- community's, which is what a worker's cache of that community's searches is checked against.
create or replace function knowledge_base_version() returns bigint
language sql stable
set search_path = public, extensions
as $$
  select coalesce(sum(version), 0)::bigint from knowledge_base_state
$$;

create or replace function knowledge_base_version(community text) returns bigint
language sql stable
set search_path = public, extensions
as $$
  select coalesce((select s.version from knowledge_base_state s
                    where s.community = knowledge_base_version.community), 0)::bigint
$$;

-- ---- the query log and its monitoring view (006, 007), per community ---------------------------
alter table query_log add column if not exists community text;
create index if not exists query_log_community_created_at on query_log (community, created_at);

-- 007's view stays as it is (pasting 007 again must not fail); this one splits it by community.
create or replace view retrieval_source_mix_by_community as
select date_trunc('day', created_at) as day,
       community,
       count(*) as queries,
       round(avg(case when status = 'success' then 1.0 else 0.0 end), 3) as success_share,
       round(sum(both_legs_count)::numeric / nullif(sum(candidate_count), 0), 3) as both_legs_share,
       round(sum(vector_only_count)::numeric / nullif(sum(candidate_count), 0), 3) as vector_only_share,
       round(sum(fts_only_count)::numeric / nullif(sum(candidate_count), 0), 3) as fts_only_share,
       round(avg(avg_vector_score)::numeric, 3) as avg_vector_score,
       round(avg(avg_fts_score)::numeric, 3) as avg_fts_score,
       round(avg(best_score)::numeric, 3) as avg_best_score,
       round(avg((timings_ms ->> 'total')::numeric), 1) as avg_total_ms
from query_log
group by 1, 2;

-- ---- rights (009): the service role only --------------------------------------------------------
do $$
declare
  r text;
begin
  foreach r in array array['anon', 'authenticated'] loop
    if exists (select 1 from pg_roles where rolname = r) then
      execute format('revoke all on retrieval_source_mix_by_community from %I', r);
      execute format('revoke all on knowledge_communities from %I', r);
    end if;
  end loop;
  if exists (select 1 from pg_roles where rolname = 'service_role') then
    grant select on retrieval_source_mix_by_community, knowledge_communities to service_role;
  end if;
end
$$;
revoke all on retrieval_source_mix_by_community, knowledge_communities from public;
select arc_service_role_only('function', f)
  from unnest(array['bm25_stats_add(text[], bigint[], bigint[])', 'bm25_refresh(boolean, text)',
                    'bm25_refresh_step(integer, text)', 'bm25_stale_chunks(text)',
                    'bm25_seed_avgdl(text[], text[], text)', 'knowledge_base_bump(text[])',
                    'knowledge_base_version(text)', 'community_names()', 'knowledge_base_touch_communities()', 'bm25_community_stats_on_insert()',
                    'bm25_community_stats_on_delete()', 'bm25_community_stats_on_update()',
                    'bm25_community_stats_on_truncate()']) f;
