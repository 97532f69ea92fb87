-- 010: BM25 maintenance that never fails or blocks ingestion, at any corpus size.
--
-- The stored weights depend on the average chunk length (avgdl). 003's bm25_refresh() rewrote
-- every chunk in one statement when avgdl drifted by 5%: at 15k chunks that outlasted the
-- worker's 5 s statement timeout, so every later ingest failed the same way, and holding
-- bm25_corpus while it rewrote deadlocked with a concurrent re-ingest.
--
-- Now a drift only opens a new generation (one row, at once); the chunks are rewritten in small
-- batches, each its own transaction, by bm25_refresh_step(). A step skips rows another
-- transaction holds, takes no lock on bm25_corpus, and takes the knowledge-base version row
-- first, so it never waits while holding chunk rows: no deadlock with ingests or deletes. Until
-- the last step, chunks of the older generation score with the avgdl they were written with (at
-- most 5% off; benchmarks/bm25_staleness/ measures what that costs). Ingestion runs steps for a
-- bounded time after each load; `arc-retrieval db maintain` (or pg_cron calling
-- bm25_refresh_step) finishes the rest.

alter table bm25_corpus add column if not exists generation integer not null default 0;
alter table knowledge_chunks add column if not exists bm25_generation integer not null default 0;
create index if not exists knowledge_chunks_bm25_generation on knowledge_chunks (bm25_generation);

create or replace function bm25_chunk_weights() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  doc tsvector := arc_fts_document(new.section_path, new.content);
  corpus bm25_corpus;
begin
  select * into corpus from bm25_corpus where id;
  new.fts_length := bm25_document_length(doc);
  new.bm25 := bm25_document_vector(doc, corpus.avgdl_indexed, corpus.k1, corpus.b);
  new.bm25_generation := corpus.generation;
  return new;
end
$$;

-- Open a new generation when the live avgdl has drifted more than 5% from the one the weights
-- are written with (or always, with force). One row, no chunk touched. Returns whether it did.
create or replace function bm25_refresh(force boolean default false)
returns boolean
language plpgsql
set search_path = public, extensions
as $$
declare
  corpus bm25_corpus;
  live double precision;
begin
  select * into corpus from bm25_corpus where id;
  live := corpus.total_length::double precision / nullif(corpus.n_docs, 0);
  if live is null then
    return false;
  end if;
  if not force and corpus.avgdl_indexed is not null
     and abs(live - corpus.avgdl_indexed) <= 0.05 * corpus.avgdl_indexed then
    return false;
  end if;
  update bm25_corpus set avgdl_indexed = live, generation = generation + 1 where id;
  return true;
end
$$;

-- Rewrite up to max_rows chunks of an older generation with the current avgdl. Returns how many
-- it rewrote (0: up to date, or every stale row is held by another transaction right now).
create or replace function bm25_refresh_step(max_rows integer default 2000)
returns integer
language plpgsql
set search_path = public, extensions
as $$
declare
  corpus bm25_corpus;
  rewritten integer;
begin
  select * into corpus from bm25_corpus where id;
  if not exists (select 1 from knowledge_chunks where bm25_generation < corpus.generation) then
    return 0;
  end if;
  -- The version row first (every writer takes it last, after its chunk rows): a step waits, if
  -- at all, before it holds anything. Cached searches then see that weights moved.
  update knowledge_base_state set version = version + 1, changed_at = now() where id;
  perform set_config('arc.bm25_refreshing', 'on', true);
  with stale as (
    select id from knowledge_chunks
     where bm25_generation < corpus.generation
     order by bm25_generation  -- read from its index: bounded work at any size
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
end
$$;

-- How many chunks still carry weights of an older generation.
create or replace function bm25_stale_chunks()
returns bigint
language sql stable
set search_path = public, extensions
as $$
  select count(*) from knowledge_chunks
   where bm25_generation < (select generation from bm25_corpus where id)
$$;

-- A refresh step already moved the version, before taking its rows.
create or replace function knowledge_base_touch() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  if current_setting('arc.bm25_refreshing', true) = 'on' then
    return null;
  end if;
  update knowledge_base_state set version = version + 1, changed_at = now() where id;
  return null;
end
$$;

-- The same rights as 009 gives the other functions: the service role only.
select arc_service_role_only('function', f)
  from unnest(array['bm25_refresh_step(integer)', 'bm25_stale_chunks()']) f;
