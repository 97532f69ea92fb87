-- arc-retrieval: the knowledge base's schema for 1536-dim embeddings (`arc-retrieval db sql --dim 1536`).
-- Paste all of it into Supabase's SQL Editor and run it; the editor runs it as one transaction.
-- Running it again changes nothing: each migration below is applied only if this database has
-- not recorded it in schema_migrations (the record `arc-retrieval db init` keeps, so the worker
-- finds nothing left to apply); a file marked repeatable is applied again when its text changed.

set check_function_bodies = off;

create table if not exists schema_migrations (
  name        text primary key,
  checksum    text not null,
  applied_at  timestamptz not null default now()
);

select pg_advisory_xact_lock(hashtext('arc-retrieval:migrations'));

-- ===== 000_rights.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '000_rights' and checksum = '7b62f10e60577ace') then
    return;
  end if;
  execute $arc_sql$
-- 000: how every table, view, sequence and function of this project is shared on Supabase:
-- with the service role only (the worker's key). anon and authenticated (the browser's keys) get
-- nothing, and PUBLIC loses what Postgres gives it by default (EXECUTE on every new function).
-- Roles that do not exist (plain Postgres) are skipped. 009 applies it to the objects before it;
-- later files call it for their own. It runs with its caller's rights, so it grants nothing the
-- caller lacks.
-- arc: repeatable (function definitions and their rights: applied again whenever this file changes)
create or replace function arc_service_role_only(object_kind text, object_name text)
returns void
language plpgsql
set search_path = public, extensions
as $$
declare
  r text;
  grammar text;
begin
  if object_kind not in ('table', 'view', 'sequence', 'function') then
    raise exception 'object_kind must be table, view, sequence or function' using errcode = '22023';
  end if;
  -- GRANT and REVOKE name a view as a table; a view gets everything a table does (INSERT,
  -- TRUNCATE, TRIGGER: LOCK TABLE needs only one of them), so it is revoked the same way.
  grammar := case object_kind when 'view' then 'table' else object_kind end;
  execute format('revoke all on %s %s from public', grammar, object_name);
  foreach r in array array['anon', 'authenticated'] loop
    if exists (select 1 from pg_roles where rolname = r) then
      execute format('revoke all on %s %s from %I', grammar, object_name, r);
    end if;
  end loop;
  if exists (select 1 from pg_roles where rolname = 'service_role') then
    execute format('grant %s on %s %s to service_role',
                   case object_kind when 'table' then 'select, insert, update, delete'
                                    when 'view' then 'select'
                                    when 'sequence' then 'usage, select'
                                    else 'execute' end,
                   grammar, object_name);
  end if;
end
$$;

select arc_service_role_only('function', 'arc_service_role_only(text, text)');
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('000_rights', '7b62f10e60577ace')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 000_rights';
end
$arc_migration$;

-- ===== 001_extensions.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '001_extensions') then
    return;
  end if;
  execute $arc_sql$
-- 001: extensions. pgvector gives the vector and sparsevec types and the HNSW index.
-- Supabase keeps extensions in schema `extensions` (Database > Extensions enables "vector" there;
-- its Security Advisor flags an extension in public), so this file puts it there when that schema
-- exists, and in the default schema on plain Postgres. Nothing is done when it is enabled already.
do $$
begin
  if exists (select 1 from pg_namespace where nspname = 'extensions') then
    create extension if not exists vector with schema extensions;
  else
    create extension if not exists vector;
  end if;
end
$$;
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('001_extensions', 'b9f58eb8e51fd479')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 001_extensions';
end
$arc_migration$;

-- ===== 002_knowledge_chunks.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '002_knowledge_chunks') then
    return;
  end if;
  execute $arc_sql$
-- 002: the chunk table and its indexes.
-- The embedding size is written as vector(1536) (text-embedding-3-large with dimensions=1536).
-- For another model print this file with `arc-retrieval db sql --dim N`.

-- The text the full-text leg indexes: the section hierarchy then the content, so a heading
-- ("Fencing") finds the chunks under it. One function, used by the generated column and by the
-- BM25 trigger, so the two can never disagree.
create or replace function arc_fts_document(section_path text, content text)
returns tsvector
language sql immutable parallel safe
as $$
  select to_tsvector('english'::regconfig, coalesce(section_path, '') || ' ' || coalesce(content, ''))
$$;

create table if not exists knowledge_chunks (
  id             bigint generated always as identity primary key,
  document_id    text not null,
  document_name  text not null,
  document_type  text not null check (document_type in
                   ('design_guidelines', 'ccr', 'response_letter', 'application_form', 'other')),
  section_path   text not null default '',   -- e.g. 'Chapter 4 > 4.2 > Fencing'
  page_number    integer,                     -- 1-based page of the chunk's start; null for text
  chunk_index    integer not null,            -- order within the document, from 0
  is_binding     boolean not null default true,
  superseded_by  text,                        -- document_id of the superseding document
  content        text not null,
  token_count    integer not null,
  metadata       jsonb not null default '{}'::jsonb,
  embedding      vector(1536),
  fts            tsvector generated always as (arc_fts_document(section_path, content)) stored,
  -- BM25 document side (see 003_bm25.sql): saturated term weights as a sparse vector and the
  -- document length in lexemes. Filled by a trigger; never written by clients.
  bm25           sparsevec,
  fts_length     integer not null default 0,
  created_at     timestamptz not null default now(),
  constraint knowledge_chunks_document_chunk unique (document_id, chunk_index)
);

-- Keep the BM25 weights in the row itself (pgvector stores sparsevec EXTERNAL by default): the
-- full-text leg reads this column for every matching chunk, and a TOAST lookup per row cost about
-- 10% of its p95 at 100k chunks. The wide columns (content, fts, embedding) go out of line instead.
alter table knowledge_chunks alter column bm25 set storage main;

-- HNSW, cosine. m=16, ef_construction=64 are pgvector's defaults: recall@40 0.99 at 10k chunks
-- and about 0.9 at 100k on the (deliberately clustered) synthetic data of benchmarks/scale/, at
-- a build time of 18 s per 100k; raise ef_construction (or m to 24) for more recall at scale. The query side sets hnsw.ef_search itself (hybrid_search).
create index if not exists knowledge_chunks_embedding_hnsw
  on knowledge_chunks using hnsw (embedding vector_cosine_ops) with (m = 16, ef_construction = 64);
-- (document_id, chunk_index) is indexed by the unique constraint above.
create index if not exists knowledge_chunks_document_type on knowledge_chunks (document_type);
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('002_knowledge_chunks', 'dde398af0aff047a')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 002_knowledge_chunks';
end
$arc_migration$;

-- ===== 003_bm25.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '003_bm25') then
    return;
  end if;
  execute $arc_sql$
-- 003: Okapi BM25 inside Postgres, with nothing beyond pgvector.
--
-- Postgres's own ts_rank_cd has no inverse document frequency, so it ranks questions poorly.
-- Here BM25 is split the way an inverted index splits it:
--   * document side, stored per chunk in knowledge_chunks.bm25 (a pgvector sparsevec):
--       w(t, d) = tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))
--     indexed by a stable hash of the lexeme; tf = number of positions of the lexeme in the
--     chunk's tsvector, |d| = sum of tf (stopwords already removed by the 'english' config);
--   * query side, computed at query time from live statistics:
--       idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))            (Lucene/bm25s form)
--     so that score(d, q) = sum over query lexemes of idf * w  =  -(bm25 <#> query_vector).
--
-- N, df and the summed lengths are kept exact by statement-level triggers on every insert,
-- update, delete and truncate of knowledge_chunks, whoever makes the change. Only avgdl inside
-- the stored weights can lag: bm25_refresh() rewrites the weights when the live avgdl has moved
-- more than 5% from the one they were built with (ingestion calls it after every load).
--
-- k1 = 0.9, b = 0.4 (the bm25s / Anserini defaults; measured in benchmarks/retrieval/).
-- Change them with: update bm25_corpus set k1 = .., b = ..; then `arc-retrieval db maintain --force`
-- (010_bm25_maintenance.sql rewrites the weights in steps).

create table if not exists bm25_corpus (
  id             boolean primary key default true check (id),
  n_docs         bigint not null default 0,
  total_length   bigint not null default 0,
  avgdl_indexed  double precision,          -- the avgdl the stored weights were built with
  k1             double precision not null default 0.9,
  b              double precision not null default 0.4
);
-- (030 keys this table by community instead: pasted again after it, this row is its 'default' one)
do $$
begin
  if exists (select 1 from information_schema.columns where table_schema = current_schema()
              and table_name = 'bm25_corpus' and column_name = 'id') then
    insert into bm25_corpus (id) values (true) on conflict (id) do nothing;
  end if;
end
$$;

create table if not exists bm25_terms (
  lexeme  text primary key,
  df      bigint not null
);

-- Stable across Postgres versions (unlike hashtext): 32 bits of md5, folded into sparsevec's
-- index range. Two lexemes sharing an index only matter if both are in one query and one chunk.
create or replace function bm25_lexeme_index(lexeme text)
returns integer
language sql immutable parallel safe
as $$
  select (('x' || substr(md5(lexeme), 1, 8))::bit(32)::bigint % 999999999)::integer + 1
$$;

create or replace function bm25_document_vector(doc tsvector, avgdl double precision,
                                                k1 double precision, b double precision)
returns sparsevec
language sql immutable parallel safe
as $$
  with terms as (
    select bm25_lexeme_index(t.lexeme) as i, coalesce(array_length(t.positions, 1), 1) as tf
    from unnest(doc) as t
  ), len as (
    select coalesce(sum(tf), 0) as dl from terms
  ), grouped as (
    select i, sum(tf)::double precision as tf from terms group by i
  )
  select coalesce(
    (select ('{' || string_agg(g.i || ':' ||
                 (g.tf * (k1 + 1) / (g.tf + k1 * (1 - b + b * len.dl / greatest(coalesce(avgdl, len.dl), 1)))),
               ',' order by g.i) || '}/999999999')::sparsevec
     from grouped g, len),
    '{}/999999999'::sparsevec)
$$;

create or replace function bm25_document_length(doc tsvector)
returns integer
language sql immutable parallel safe
as $$
  select coalesce(sum(coalesce(array_length(t.positions, 1), 1)), 0)::integer from unnest(doc) as t
$$;

-- Row trigger: compute the stored weights when a chunk's text is written.
create or replace function bm25_chunk_weights() returns trigger
language plpgsql
as $$
declare
  doc tsvector := arc_fts_document(new.section_path, new.content);
  corpus bm25_corpus;
begin
  select * into corpus from bm25_corpus where id;
  new.fts_length := bm25_document_length(doc);
  new.bm25 := bm25_document_vector(doc, corpus.avgdl_indexed, corpus.k1, corpus.b);
  return new;
end
$$;

drop trigger if exists knowledge_chunks_bm25_weights on knowledge_chunks;
create trigger knowledge_chunks_bm25_weights
  before insert or update of section_path, content on knowledge_chunks
  for each row execute function bm25_chunk_weights();

-- Statement triggers: keep N, df and total length exact. Lexemes are upserted in sorted order;
-- that alone did not prevent deadlocks across statements, and 014 takes the corpus row first.
create or replace function bm25_stats_add(delta integer, rows_changed bigint, length_changed bigint)
returns void
language sql
as $$
  update bm25_corpus
     set n_docs = n_docs + delta * rows_changed,
         total_length = total_length + delta * length_changed
   where id;
$$;

create or replace function bm25_stats_on_insert() returns trigger
language plpgsql
as $$
begin
  insert into bm25_terms (lexeme, df)
    select t.lexeme, count(*) from new_rows n, unnest(n.fts) t group by t.lexeme order by t.lexeme
  on conflict (lexeme) do update set df = bm25_terms.df + excluded.df;
  perform bm25_stats_add(1, (select count(*) from new_rows), (select coalesce(sum(fts_length), 0) from new_rows));
  return null;
end
$$;

create or replace function bm25_stats_on_delete() returns trigger
language plpgsql
as $$
begin
  update bm25_terms d set df = d.df - g.n
    from (select t.lexeme, count(*) as n from old_rows o, unnest(o.fts) t group by t.lexeme) g
   where d.lexeme = g.lexeme;
  delete from bm25_terms where df <= 0;
  perform bm25_stats_add(-1, (select count(*) from old_rows), (select coalesce(sum(fts_length), 0) from old_rows));
  return null;
end
$$;

-- Transition tables carry no statistics; without this the planner may pick a nested loop over
-- two large row sets.
create or replace function bm25_stats_on_update() returns trigger
language plpgsql
set enable_nestloop = off
as $$
begin
  -- bm25_refresh() rewrites weights only; the text, and so the statistics, did not change.
  if current_setting('arc.bm25_refreshing', true) = 'on' then
    return null;
  end if;
  -- Only rows whose text changed move the statistics (marking supersession does not).
  if not exists (select 1 from old_rows o join new_rows n on n.id = o.id where o.fts is distinct from n.fts) then
    return null;
  end if;
  update bm25_terms d set df = d.df - g.n
    from (select t.lexeme, count(*) as n
            from old_rows o join new_rows n on n.id = o.id, unnest(o.fts) t
           where o.fts is distinct from n.fts group by t.lexeme) g
   where d.lexeme = g.lexeme;
  insert into bm25_terms (lexeme, df)
    select t.lexeme, count(*)
      from old_rows o join new_rows n on n.id = o.id, unnest(n.fts) t
     where o.fts is distinct from n.fts group by t.lexeme order by t.lexeme
  on conflict (lexeme) do update set df = bm25_terms.df + excluded.df;
  delete from bm25_terms where df <= 0;
  perform bm25_stats_add(1, 0, (select coalesce(sum(n.fts_length - o.fts_length), 0)
                                  from old_rows o join new_rows n on n.id = o.id));
  return null;
end
$$;

create or replace function bm25_stats_on_truncate() returns trigger
language plpgsql
as $$
begin
  delete from bm25_terms;
  update bm25_corpus set n_docs = 0, total_length = 0, avgdl_indexed = null where id;
  return null;
end
$$;

drop trigger if exists knowledge_chunks_bm25_insert on knowledge_chunks;
create trigger knowledge_chunks_bm25_insert after insert on knowledge_chunks
  referencing new table as new_rows for each statement execute function bm25_stats_on_insert();
drop trigger if exists knowledge_chunks_bm25_delete on knowledge_chunks;
create trigger knowledge_chunks_bm25_delete after delete on knowledge_chunks
  referencing old table as old_rows for each statement execute function bm25_stats_on_delete();
drop trigger if exists knowledge_chunks_bm25_update on knowledge_chunks;
create trigger knowledge_chunks_bm25_update after update on knowledge_chunks
  referencing old table as old_rows new table as new_rows
  for each statement execute function bm25_stats_on_update();
drop trigger if exists knowledge_chunks_bm25_truncate on knowledge_chunks;
create trigger knowledge_chunks_bm25_truncate after truncate on knowledge_chunks
  for each statement execute function bm25_stats_on_truncate();

-- Rebuild the stored weights when avgdl has drifted (or always, with force). Returns whether it
-- rewrote anything. Cheap to call after every load: it usually returns false at once.
create or replace function bm25_refresh(force boolean default false)
returns boolean
language plpgsql
as $$
declare
  corpus bm25_corpus;
  live double precision;
begin
  select * into corpus from bm25_corpus where id for update;
  live := corpus.total_length::double precision / nullif(corpus.n_docs, 0);
  if live is null then
    return false;
  end if;
  if not force and corpus.avgdl_indexed is not null
     and abs(live - corpus.avgdl_indexed) <= 0.05 * corpus.avgdl_indexed then
    return false;
  end if;
  update bm25_corpus set avgdl_indexed = live where id;
  perform set_config('arc.bm25_refreshing', 'on', true);
  update knowledge_chunks set bm25 = bm25_document_vector(fts, live, corpus.k1, corpus.b);
  perform set_config('arc.bm25_refreshing', 'off', true);
  return true;
end
$$;

-- Before the first load into an empty table, take avgdl from the documents about to be loaded,
-- so their weights are right as they are written and bm25_refresh() has nothing to rewrite.
create or replace function bm25_seed_avgdl(sections text[], contents text[])
returns void
language sql
as $$
  update bm25_corpus
     set avgdl_indexed = (select avg(bm25_document_length(arc_fts_document(s, c)))
                            from unnest(sections, contents) as t(s, c))
   where id and n_docs = 0;
$$;

-- The query side: one row per distinct query lexeme with its live df and idf. A lexeme repeated
-- in the question counts once (qtf = 1): weighting repeats lowered nDCG@10 on SciFact (0.684 vs 0.688).
create or replace function bm25_query_terms(query_text text)
returns table (lexeme text, idx integer, qtf integer, df bigint, idf double precision)
language sql stable
as $$
  select q.lexeme,
         bm25_lexeme_index(q.lexeme),
         1,
         coalesce(t.df, 0),
         ln(1 + (c.n_docs - coalesce(t.df, 0) + 0.5) / (coalesce(t.df, 0) + 0.5))
  from unnest(to_tsvector('english'::regconfig, coalesce(query_text, ''))) as q
  cross join bm25_corpus c
  left join bm25_terms t on t.lexeme = q.lexeme
  where c.id
$$;
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('003_bm25', '48fb78583d8c5329')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 003_bm25';
end
$arc_migration$;

-- ===== 004_hybrid_search.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '004_hybrid_search') then
    return;
  end if;
  execute $arc_sql$
-- 004: hybrid_search, the one function every retrieval goes through (direct Postgres and
-- Supabase RPC alike).
--
-- Two legs, each filtered the same way and each bounded to match_count rows:
--   vector leg  : HNSW cosine search; vector_score = cosine similarity.
--   full-text leg: chunks holding the question's words (impact-ordered postings, 012), ranked by
--                  BM25 (003_bm25.sql); fts_score = BM25 divided by the score of an average-length
--                  chunk holding every query lexeme once (lexemes absent from the corpus
--                  included), capped at 1, so it is comparable across queries.
-- Fused by FULL OUTER JOIN:
--   'weighted' : weighted mean of each leg's score min-max normalised over the candidate list
--                (a leg that missed the chunk counts 0). Measured better than absolute scores
--                and than RRF on SciFact (benchmarks/retrieval/);
--   'rrf'      : sum of weight / (rrf_k + rank) over the legs a chunk appears in.
-- Without an embedding (the embedder failed) only the full-text leg runs and fts_weight is 1.
-- expansion_text: extra words for the full-text leg only (synonyms), weighted expansion_weight.
--
-- Bounded work at any size: the full-text leg reads each question word's best chunks from the
-- impact-ordered postings (012_bm25_postings.sql), at most fts_scan_limit index entries shared
-- among the words (a short list whole, the rest split evenly among the longer ones), and adds
-- up what it read of each chunk (its partial score). Chunks are then scored exactly from their
-- stored weights, best partial score first, match_count and then all the others at once, at
-- most fts_rescore (400) of them; filters apply as they are scored. Scoring stops early once
-- no chunk left can reach the match_count-th score: each has an upper bound, what was read of
-- it plus, for every word it was not read in, the last weight read there (0 when the word's
-- list is complete and was read whole). On a governing-documents corpus every list is complete,
-- the bounds are the scores, and the leg scores match_count chunks. At 100k chunks and more it
-- seldom stops early: among 1M distractors 400 scored came within 0.009 nDCG@10 of exact BM25
-- and 1,000 within 0.002 (benchmarks/scale/quality/), but each chunk scored costs 3-12 us, and
-- 1,000 took the full-text leg alone to 17 ms p50 at 100k chunks. Raise fts_rescore for recall
-- on large corpora that can afford it.
-- The function sets its own hnsw.ef_search and, on pgvector >= 0.8, iterative index scans, so a
-- filtered vector leg still fills match_count rows.
-- No longer repeatable: 031 redefines hybrid_search per community, and applying this file again after
-- it would bring back a definition that reads every community.
-- Earlier signatures (0.1.0; before the postings, with the rare-word selection's two
-- parameters): dropped so named calls stay unambiguous.
drop function if exists hybrid_search(text, vector, integer, double precision, double precision, text, integer,
                                      text[], boolean, boolean, integer, double precision, integer, integer);
drop function if exists hybrid_search(text, vector, integer, double precision, double precision, text, integer,
                                      text[], boolean, boolean, integer, double precision, integer, integer,
                                      text, double precision);
create or replace function hybrid_search(
  query_text          text,
  query_embedding     vector default null,
  match_count         integer default 40,
  vector_weight       double precision default 0.7,
  fts_weight          double precision default 0.3,
  fusion              text default 'weighted',
  rrf_k               integer default 60,
  document_types      text[] default null,
  binding_only        boolean default false,
  include_superseded  boolean default false,
  ef_search           integer default null,
  fts_scan_limit      integer default 5000,
  expansion_text      text default null,
  expansion_weight    double precision default 0.5,
  fts_rescore         integer default null
)
returns table (
  id bigint, document_id text, document_name text, document_type text, section_path text,
  page_number integer, chunk_index integer, is_binding boolean, superseded_by text,
  content text, token_count integer, metadata jsonb,
  vector_score double precision, fts_score double precision, bm25_score double precision,
  fused_score double precision, vector_rank integer, fts_rank integer
)
language plpgsql
set search_path = public, extensions
set statement_timeout = '5s'
-- Every read below goes through an index (HNSW, the postings' impact order, primary keys); the
-- cost model, which does not see that the wide columns are TOASTed, would sometimes scan instead.
set enable_seqscan = off
-- Its two statements keep one plan each for the session: left to choose, Postgres planned them
-- afresh on every call (custom plans), about 1 ms of a 10 ms search at 100k chunks, and the
-- generic plans are no slower (benchmarks/scale/).
set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
declare
  qvec        sparsevec;
  idf_mass    double precision;
  read_words  text[];
  read_weight double precision[];
  read_count  integer[];
  read_floor  real[];
  rescore     integer;
  unread_bound    double precision;
  candidate       bigint[];
  candidate_above double precision[];
  next_at         integer := 1;
  batch_ids       bigint[];
  batch_scores    double precision[];
  scored_ids      bigint[] := '{}';
  scored          double precision[] := '{}';
  kth_score       double precision;
  rescore_step    integer := match_count;
  vw          double precision := coalesce(vector_weight, 0.7);
  fw          double precision := coalesce(fts_weight, 0.3);
begin
  if match_count is null or match_count < 1 or match_count > 1000 then
    raise exception 'match_count must be between 1 and 1000' using errcode = '22023';
  end if;
  if fts_scan_limit is null or fts_scan_limit < 1 then
    raise exception 'fts_scan_limit must be at least 1' using errcode = '22023';
  end if;
  if fts_rescore is not null and fts_rescore < 1 then
    raise exception 'fts_rescore must be at least 1' using errcode = '22023';
  end if;
  if fusion is null or fusion not in ('weighted', 'rrf') then
    raise exception 'fusion must be weighted or rrf' using errcode = '22023';
  end if;
  if query_embedding is null then
    vw := 0;
    fw := 1;
  end if;

  perform set_config('hnsw.ef_search',
                     least(greatest(coalesce(ef_search, 3 * match_count), match_count, 100), 1000)::text, true);
  begin
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
  exception when others then
    null;  -- pgvector < 0.8: no iterative scans; the larger ef_search above still helps
  end;

  rescore := least(coalesce(fts_rescore, 400), fts_scan_limit);

  -- One pass over the question's lexemes gives the BM25 query vector and what the leg reads.
  with all_terms as (
    select * from bm25_query_terms(query_text)
  ), terms as (
    select t.lexeme, t.idx, t.df, t.idf * t.qtf as w from all_terms t where t.df > 0
    union all
    -- the documents' words for the question's (worker/retrieve/vocabulary.py): they find and score
    -- chunks at expansion_weight, and do not count in the normaliser below
    select e.lexeme, e.idx, e.df, e.idf * e.qtf * coalesce(expansion_weight, 0.5)
    from bm25_query_terms(expansion_text) e
    where e.df > 0 and e.lexeme not in (select lexeme from all_terms)
  ), by_index as (
    select idx, sum(w) as w from terms group by idx
  ), by_length as (
    -- How many postings each word reads: fts_scan_limit shared out water-filling, shortest list
    -- first, so that a short list is read whole and what it leaves goes to the longer ones.
    select t.lexeme, t.w, l.kept as listed, l.floor,
           row_number() over (order by l.kept, t.lexeme) as place, count(*) over () as words,
           coalesce(sum(l.kept) over (order by l.kept, t.lexeme rows between unbounded preceding and 1 preceding),
                    0) as before
    -- one index lookup per word (limit 1 keeps the planner from turning it into a join, for
    -- which the generic plan read all of bm25_terms: 8 ms at 10k chunks)
    from terms t cross join lateral (
      select b.kept, b.floor from bm25_terms b where b.lexeme = t.lexeme limit 1
    ) l
  ), level as (
    select coalesce((array_agg((fts_scan_limit - before)::double precision / (words - place + 1) order by place)
                       filter (where listed > (fts_scan_limit - before)::double precision / (words - place + 1)))[1],
                    'infinity') as share
    from by_length
  )
  select (select ('{' || string_agg(idx || ':' || w, ',' order by idx) || '}/999999999')::sparsevec
            from by_index),
         -- the normaliser counts every query lexeme, found in the corpus or not: a question
         -- whose one matching word is "2019" is not a full match ("who won the world series
         -- in 2019" scored fts 1.0 against governing documents when only found words counted)
         (select sum(idf * qtf) from all_terms),
         r.words, r.weights, r.counts, r.floors
    into qvec, idf_mass, read_words, read_weight, read_count, read_floor
    from (select array_agg(lexeme order by place) as words,
                 array_agg(w order by place) as weights,
                 array_agg(greatest(least(listed::double precision, floor(share)), 1)::integer order by place) as counts,
                 -- a list read whole bounds the chunks it does not hold by its floor (0: it holds them all)
                 array_agg(case when listed <= share then coalesce(floor, 0) end order by place) as floors
          from by_length, level) r;

  -- The candidates: every chunk read, with the most its BM25 score can be. A chunk missing from
  -- a word's list holds that word at most as strongly as the last posting read there (or below
  -- the list's floor, 012, when the whole list was read; not at all when that list is complete),
  -- so its bound is the sum of what was read plus those ceilings for the words it was not read in.
  with words as (
    select q.lexeme, q.w, q.n,
           -- the n-th weight of the list, where its reading stops (one index probe)
           q.w * coalesce(q.list_floor, (select b.weight from bm25_postings b where b.lexeme = q.lexeme
                                          order by b.weight desc offset q.n - 1 limit 1), 0) as ceiling
    from unnest(read_words, read_weight, read_count, read_floor) as q(lexeme, w, n, list_floor)
  ), reads as (
    select q.w, q.ceiling, p.chunk_id, p.weight
    from words q
    cross join lateral (
      select b.chunk_id, b.weight from bm25_postings b
      where b.lexeme = q.lexeme
      order by b.weight desc
      limit q.n
    ) p
  ), bounded as (
    -- Scored in the order of what was read of them (partial scores), which finds the best
    -- chunks sooner than their bounds do when not all can be scored: nDCG@10 among 1M
    -- distractors 0.830 against 0.821 for bound order with 400 scored (benchmarks/scale/quality/).
    select r.chunk_id, sum(r.w * r.weight) as partial, sum(r.w * r.weight - r.ceiling) as above
    from reads r
    group by r.chunk_id
    order by partial desc, r.chunk_id
    limit rescore
  )
  -- both arrays in the same order (Postgres 16 and later sort once for the two)
  select coalesce((select sum(ceiling) from words), 0),
         array_agg(chunk_id order by partial desc, chunk_id),
         array_agg(above order by partial desc, chunk_id)
  from bounded
    into unread_bound, candidate, candidate_above;

  -- Score them exactly (their stored weights) in that order until no bound left can reach the
  -- match_count-th score: the leg is then exact over every chunk read, and over the whole
  -- corpus when that score also beats unread_bound. Filters apply here, so a filtered leg stops
  -- at its own match_count-th score.
  while next_at <= coalesce(cardinality(candidate), 0) loop
    -- the highest bound among those not yet scored, taken only when there is a score to beat
    -- (a window over the candidates for every row cost more than these few looks)
    exit when kth_score is not null
              and unread_bound + (select max(a) from unnest(candidate_above[next_at:]) a) < kth_score;
    select coalesce(array_agg(c.id), '{}'), coalesce(array_agg(-(c.bm25 <#> qvec)), '{}')
      into batch_ids, batch_scores
      from knowledge_chunks c
     where c.id = any (candidate[next_at:next_at + rescore_step - 1])
       and (document_types is null or c.document_type = any (document_types))
       and (not binding_only or c.is_binding)
       and (include_superseded or c.superseded_by is null);
    scored_ids := scored_ids || batch_ids;
    scored := scored || batch_scores;
    if cardinality(scored) >= match_count then
      select s into kth_score from unnest(scored) s order by s desc offset match_count - 1 limit 1;
    end if;
    next_at := next_at + rescore_step;
    -- a leg that did not stop after its first match_count seldom stops later (100k chunks: 350
    -- of 400 scored on average): one read for the rest, not more statements (0.2 ms at 100k)
    rescore_step := rescore;
  end loop;
  -- what the pruning saved (set client_min_messages = debug to see it)
  raise debug 'hybrid_search fts leg: % candidates, % scored, % passed the filters', coalesce(cardinality(candidate), 0),
    least(next_at - 1, coalesce(cardinality(candidate), 0)), cardinality(scored);

  return query
  with vector_leg as (
    -- the distance once: each evaluation reads the chunk's TOASTed embedding again
    select v.id, 1 - v.distance as score, (row_number() over (order by v.distance))::integer as rank
    from (
      select c.id, c.embedding <=> query_embedding as distance
      from knowledge_chunks c
      where query_embedding is not null
        -- an expression, not the bare column: at 1M chunks the planner otherwise reads every
        -- chunk of the type through the btree and sorts them (90-200 ms) instead of filtering
        -- during the HNSW scan (iterative scans keep filling the list)
        and (document_types is null or (c.document_type || '') = any (document_types))
        and (not binding_only or c.is_binding)
        and (include_superseded or c.superseded_by is null)
      order by c.embedding <=> query_embedding
      limit match_count
    ) v
  ), fts_leg as (
    select f.id, f.score, (row_number() over (order by f.score desc, f.id))::integer as rank
    from unnest(scored_ids, scored) as f(id, score)
    order by f.score desc, f.id
    limit match_count
  ), joined as (
    select coalesce(v.id, f.id) as id,
           v.score as vector_score,
           case when f.score is not null then least(f.score / nullif(idf_mass, 0), 1.0) end as fts_score,
           f.score as bm25_score,
           v.rank as vector_rank,
           f.rank as fts_rank
    from vector_leg v
    full outer join fts_leg f on f.id = v.id
  ), normalised as (
    -- min-max within this candidate list; a chunk missing from a leg gets 0 for it
    select j.*,
           case when j.vector_score is null then 0.0 else coalesce(
             (j.vector_score - min(j.vector_score) over ()) /
             nullif(max(j.vector_score) over () - min(j.vector_score) over (), 0), 1.0) end as vector_norm,
           case when j.bm25_score is null then 0.0 else coalesce(
             (j.bm25_score - min(j.bm25_score) over ()) /
             nullif(max(j.bm25_score) over () - min(j.bm25_score) over (), 0), 1.0) end as fts_norm
    from joined j
  )
  select c.id, c.document_id, c.document_name, c.document_type, c.section_path,
         c.page_number, c.chunk_index, c.is_binding, c.superseded_by,
         c.content, c.token_count, c.metadata,
         n.vector_score, n.fts_score, n.bm25_score,
         case when fusion = 'rrf' then
                coalesce(vw / (rrf_k + n.vector_rank), 0) + coalesce(fw / (rrf_k + n.fts_rank), 0)
              else
                (vw * n.vector_norm + fw * n.fts_norm) / nullif(vw + fw, 0)
         end as fused_score,
         n.vector_rank, n.fts_rank
  from normalised n
  join knowledge_chunks c on c.id = n.id
  order by 16 desc, 1;
end
$$;

-- A new signature is a new function, which PUBLIC may execute: the rights 009 gives, again, so
-- that an upgrade (this file applied after 009) does not open it to anon.
select arc_service_role_only('function', p.oid::regprocedure::text)
  from pg_proc p
 where p.pronamespace = 'public'::regnamespace and p.proname = 'hybrid_search';
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('004_hybrid_search', '2b734ce77116333a')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 004_hybrid_search';
end
$arc_migration$;

-- ===== 005_chunk_neighbours.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '005_chunk_neighbours') then
    return;
  end if;
  execute $arc_sql$
-- 005: a chunk's neighbours in its document (chunk_index within +/- radius, itself included),
-- in document order. Context assembly uses it when a chunk is cut mid-thought.
-- No longer repeatable: 031 redefines chunk_neighbours per community, and applying this file again after
-- it would bring back a definition that reads every community.
create or replace function chunk_neighbours(chunk_id bigint, radius integer default 1)
returns table (
  id bigint, document_id text, document_name text, document_type text, section_path text,
  page_number integer, chunk_index integer, is_binding boolean, superseded_by text,
  content text, token_count integer, metadata jsonb
)
language sql stable
set search_path = public, extensions
as $$
  select n.id, n.document_id, n.document_name, n.document_type, n.section_path,
         n.page_number, n.chunk_index, n.is_binding, n.superseded_by,
         n.content, n.token_count, n.metadata
  from knowledge_chunks c
  join knowledge_chunks n
    on n.document_id = c.document_id
   and n.chunk_index between c.chunk_index - greatest(radius, 0) and c.chunk_index + greatest(radius, 0)
  where c.id = chunk_id
  order by n.chunk_index
$$;
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('005_chunk_neighbours', '97985100eec0b1f7')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 005_chunk_neighbours';
end
$arc_migration$;

-- ===== 006_query_log.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '006_query_log') then
    return;
  end if;
  execute $arc_sql$
-- 006: one row per answered retrieval request, written by the worker after it responds.
-- No document text is stored here, only the question and numbers.
create table if not exists query_log (
  id                  bigint generated always as identity primary key,
  created_at          timestamptz not null default now(),
  request_id          text,
  query               text not null,
  normalized_query    text,
  query_type          text,
  status              text not null,
  best_score          double precision,
  result_count        integer not null default 0,
  candidate_count     integer not null default 0,
  both_legs_count     integer not null default 0,
  vector_only_count   integer not null default 0,
  fts_only_count      integer not null default 0,
  avg_vector_score    double precision,
  avg_fts_score       double precision,
  reranked            boolean not null default false,
  warnings            text[] not null default '{}',
  timings_ms          jsonb not null default '{}'::jsonb
);
create index if not exists query_log_created_at on query_log (created_at);
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('006_query_log', '13123f869f198d4c')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 006_query_log';
end
$arc_migration$;

-- ===== 007_monitoring.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '007_monitoring') then
    return;
  end if;
  execute $arc_sql$
-- 007: the monitoring view. Where do candidates come from: both legs, vector only, full-text
-- only, with average scores, per day. If "fts only" stays near 0 the full-text leg adds nothing;
-- if "both" is high the legs agree and the fusion weights matter little.
--   select * from retrieval_source_mix order by day desc limit 14;
create or replace view retrieval_source_mix as
select date_trunc('day', created_at) as day,
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
group by 1;
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('007_monitoring', '767820e5242ed4a4')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 007_monitoring';
end
$arc_migration$;

-- ===== 008_knowledge_base_version.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '008_knowledge_base_version') then
    return;
  end if;
  execute $arc_sql$
-- 008: a counter that moves with every change to knowledge_chunks, whoever makes it (a worker,
-- the CLI, another instance, SQL by hand). A worker serves a cached search only while the counter
-- is where it was when the search ran, so a replaced or deleted chunk is never served from memory.
create table if not exists knowledge_base_state (
  id          boolean primary key default true check (id),
  version     bigint not null default 0,
  changed_at  timestamptz not null default now()
);
-- (030 keys this table by community instead: pasted again after it, there is nothing to add)
do $$
begin
  if exists (select 1 from information_schema.columns where table_schema = current_schema()
              and table_name = 'knowledge_base_state' and column_name = 'id') then
    insert into knowledge_base_state (id) values (true) on conflict (id) do nothing;
  end if;
end
$$;

-- A statement trigger: one row update per statement, after the BM25 triggers (triggers fire in
-- name order), so every writer takes bm25_corpus, then this row: one lock order, no deadlocks.
create or replace function knowledge_base_touch() returns trigger
language plpgsql
as $$
begin
  update knowledge_base_state set version = version + 1, changed_at = now() where id;
  return null;
end
$$;

drop trigger if exists knowledge_chunks_version on knowledge_chunks;
create trigger knowledge_chunks_version
  after insert or update or delete or truncate on knowledge_chunks
  for each statement execute function knowledge_base_touch();

create or replace function knowledge_base_version() returns bigint
language sql stable
as $$
  select version from knowledge_base_state where id
$$;
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('008_knowledge_base_version', 'b5f1241cfa562ca2')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 008_knowledge_base_version';
end
$arc_migration$;

-- ===== 009_security.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '009_security') then
    return;
  end if;
  execute $arc_sql$
-- 009: who may touch the knowledge base. On Supabase every table in schema public is exposed
-- through PostgREST, and Supabase's default privileges grant the anon role (whose key ships in
-- browsers) everything on new tables and functions: before this, `anon` could read every chunk
-- and every user question in query_log, and delete the knowledge base.
--
--   * Row level security on every table this SQL creates, with no policy: a role without
--     BYPASSRLS (anon, authenticated) sees and changes no row. The owner (the role that loaded
--     this SQL, e.g. postgres) and service_role (BYPASSRLS on Supabase) are not affected.
--   * Privileges taken back from PUBLIC, anon and authenticated (RLS does not cover TRUNCATE,
--     and a revoked table fails loudly instead of answering an empty list).
--   * The functions keep invoker rights: hybrid_search and chunk_neighbours read nothing their
--     caller may not read itself, so a mistake in a grant cannot expose more than that role
--     already has (a security definer function would run as the owner, past RLS). EXECUTE is
--     revoked from PUBLIC, anon and authenticated and granted to service_role: the worker calls
--     them with the service role key (SUPABASE_KEY), never with the anon key.
--   * Every function gets a fixed search_path (Supabase's advisor flags mutable ones); the
--     pgvector types are found in public (plain Postgres) or extensions (Supabase).
-- Roles that do not exist (plain Postgres) are skipped. Applied again by hand it changes nothing.

-- A function with its own search_path is never inlined, and bm25_document_vector (run for every
-- chunk written) called bm25_lexeme_index once per lexeme: with both pinned, writing BM25
-- weights took 1.9x as long. The hash is written out here instead (the same expression as
-- bm25_lexeme_index, which queries still use once per question word), so the pinned
-- search_path costs one setting per chunk, not one per lexeme.
create or replace function bm25_document_vector(doc tsvector, avgdl double precision,
                                                k1 double precision, b double precision)
returns sparsevec
language sql immutable parallel safe
set search_path = public, extensions
as $$
  with terms as (
    select (('x' || substr(md5(t.lexeme), 1, 8))::bit(32)::bigint % 999999999)::integer + 1 as i,
           coalesce(array_length(t.positions, 1), 1) as tf
    from unnest(doc) as t
  ), len as (
    select coalesce(sum(tf), 0) as dl from terms
  ), grouped as (
    select i, sum(tf)::double precision as tf from terms group by i
  )
  select coalesce(
    (select ('{' || string_agg(g.i || ':' ||
                 (g.tf * (k1 + 1) / (g.tf + k1 * (1 - b + b * len.dl / greatest(coalesce(avgdl, len.dl), 1)))),
               ',' order by g.i) || '}/999999999')::sparsevec
     from grouped g, len),
    '{}/999999999'::sparsevec)
$$;

alter table knowledge_chunks enable row level security;
alter table bm25_corpus enable row level security;
alter table bm25_terms enable row level security;
alter table query_log enable row level security;
alter table knowledge_base_state enable row level security;
alter table schema_migrations enable row level security;

select arc_service_role_only('table', t)
  from unnest(array['knowledge_chunks', 'bm25_corpus', 'bm25_terms', 'query_log', 'knowledge_base_state',
                    'schema_migrations']) t;

do $$
declare
  r text;
  f regprocedure;
begin
  for r in select unnest(array['anon', 'authenticated']) loop
    if exists (select 1 from pg_roles where rolname = r) then
      execute format('revoke all on all sequences in schema public from %I', r);
      execute format('revoke select on retrieval_source_mix from %I', r);
    end if;
  end loop;

  for f in
    select p.oid::regprocedure
    from pg_proc p
    where p.pronamespace = 'public'::regnamespace
      and p.proname in ('hybrid_search', 'chunk_neighbours', 'knowledge_base_version', 'knowledge_base_touch',
                        'arc_fts_document', 'bm25_lexeme_index', 'bm25_document_vector', 'bm25_document_length',
                        'bm25_chunk_weights', 'bm25_stats_add', 'bm25_stats_on_insert', 'bm25_stats_on_delete',
                        'bm25_stats_on_update', 'bm25_stats_on_truncate', 'bm25_refresh', 'bm25_seed_avgdl',
                        'bm25_query_terms')
  loop
    execute format('alter function %s set search_path = public, extensions', f);
    perform arc_service_role_only('function', f::text);
  end loop;
end
$$;
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('009_security', '8c315791962d95fa')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 009_security';
end
$arc_migration$;

-- ===== 010_bm25_maintenance.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '010_bm25_maintenance') then
    return;
  end if;
  execute $arc_sql$
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
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('010_bm25_maintenance', '8bd558b0cfce8bf9')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 010_bm25_maintenance';
end
$arc_migration$;

-- ===== 011_document_links.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '011_document_links') then
    return;
  end if;
  execute $arc_sql$
-- 011: what a document declares about others. The first chunk of a document that supersedes or
-- amends another records it in metadata ("supersedes", "amends"), and ingesting any document
-- looks those records up (superseding_document, amendments_of in queries.sql) so the marks are
-- applied whichever of the two arrives first. Without these partial indexes each lookup read
-- every chunk of the knowledge base, once per document ingested; they hold only those first
-- chunks, so they cost next to nothing.
create index if not exists knowledge_chunks_supersedes
  on knowledge_chunks ((metadata ->> 'supersedes'))
  where chunk_index = 0 and metadata ? 'supersedes';
create index if not exists knowledge_chunks_amends
  on knowledge_chunks using gin ((metadata -> 'amends') jsonb_path_ops)
  where chunk_index = 0 and metadata ? 'amends';
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('011_document_links', 'ead806e109cdd7c4')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 011_document_links';
end
$arc_migration$;

-- ===== 012_bm25_postings.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '012_bm25_postings') then
    return;
  end if;
  execute $arc_sql$
-- 012: impact-ordered postings, so that the full-text leg reads each word's best chunks first.
--
-- The leg used to read the chunks holding the question's rarest words through the GIN index,
-- at most fts_scan_limit of them in heap order, and score each from its stored weights. A
-- question made only of common words then scored whichever chunks came first in the heap
-- (not the best ones), and reading thousands of wide rows was most of the hybrid p95 at 100k
-- chunks and over. Here each lexeme keeps its best postings, ordered by their BM25 weight
-- w(t, d) (003) in an index the leg reads top-down: the question's words share fts_scan_limit
-- index entries, a chunk's partial score is the sum of the postings read, and only the best
-- few hundred candidates are scored exactly from their stored weights (004).
--
-- Bounded storage: a lexeme keeps every posting whose weight is at least its floor, and the
-- floor rises so that about postings_per_lexeme (1,000) are kept; a rarer lexeme (floor null)
-- keeps all of them. Inserts and deletes keep that exact (a deleted chunk's postings go; a new
-- chunk's go in when they reach the floor). The weights are those the chunk was written with:
-- a BM25 refresh step (010) does not rewrite postings, so a posting's weight can be up to the
-- 5% avgdl drift stale; it only orders candidates, the score is always the chunk's current one.
-- After changing k1, b or postings_per_lexeme, rebuild once: select bm25_postings_rebuild();

alter table bm25_corpus add column if not exists postings_per_lexeme integer not null default 1000;
alter table bm25_terms add column if not exists kept integer not null default 0;
alter table bm25_terms add column if not exists floor real;

create table if not exists bm25_postings (
  chunk_id  bigint not null,
  lexeme    text not null,
  weight    real not null,
  primary key (chunk_id, lexeme)
);
create index if not exists bm25_postings_impact on bm25_postings (lexeme, weight desc) include (chunk_id);

-- w(t, d) of 003 for one lexeme (the same arithmetic as bm25_document_vector).
create or replace function bm25_term_weight(tf integer, dl integer, avgdl double precision,
                                            k1 double precision, b double precision)
returns real
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select (tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / greatest(coalesce(avgdl, dl), 1))))::real
$$;

-- Add the postings of these chunks that reach their lexeme's floor, then raise the floor of
-- every lexeme now holding more than postings_per_lexeme. The caller holds the bm25_terms rows
-- of these lexemes (the statistics trigger before it upserted them in sorted order).
create or replace function bm25_postings_add(ids bigint[])
returns void
language plpgsql
set search_path = public, extensions
as $$
declare
  corpus bm25_corpus;
  full_lists text[];
  lexeme_name text;
  new_floor real;
begin
  select * into corpus from bm25_corpus where id;
  with added as (
    insert into bm25_postings (chunk_id, lexeme, weight)
    select p.chunk_id, p.lexeme, p.weight
      from (select c.id as chunk_id, t.lexeme,
                   bm25_term_weight(coalesce(array_length(t.positions, 1), 1), c.fts_length,
                                    corpus.avgdl_indexed, corpus.k1, corpus.b) as weight
              from knowledge_chunks c, unnest(c.fts) t
             where c.id = any (ids)) p
      join bm25_terms s on s.lexeme = p.lexeme
     where s.floor is null or p.weight >= s.floor
    returning lexeme
  ), grown as (
    update bm25_terms s set kept = s.kept + g.n
      from (select lexeme, count(*) as n from added group by lexeme) g
     where s.lexeme = g.lexeme
    returning s.lexeme, s.kept
  )
  select array_agg(lexeme order by lexeme) into full_lists
    from grown where kept > corpus.postings_per_lexeme;
  foreach lexeme_name in array coalesce(full_lists, '{}') loop
    select p.weight into new_floor from bm25_postings p
     where p.lexeme = lexeme_name order by p.weight desc offset corpus.postings_per_lexeme - 1 limit 1;
    with dropped as (
      delete from bm25_postings p where p.lexeme = lexeme_name and p.weight < new_floor returning 1
    )
    update bm25_terms s set floor = new_floor, kept = s.kept - (select count(*) from dropped)
     where s.lexeme = lexeme_name;
  end loop;
end
$$;

-- Remove these chunks' postings. Every kept posting had reached its floor, and nothing else
-- did: the lists stay exactly "every posting at or above the floor".
create or replace function bm25_postings_remove(ids bigint[])
returns void
language sql
set search_path = public, extensions
as $$
  with gone as (
    delete from bm25_postings p where p.chunk_id = any (ids) returning lexeme
  )
  update bm25_terms s set kept = s.kept - g.n
    from (select lexeme, count(*) as n from gone group by lexeme) g
   where s.lexeme = g.lexeme;
$$;

-- Every chunk's postings from scratch (the migration of an existing table; after a change of
-- k1, b or postings_per_lexeme). One statement over the whole table: run it from psql, not
-- under the worker's statement timeout, on a large corpus.
create or replace function bm25_postings_rebuild()
returns bigint
language plpgsql
set search_path = public, extensions
as $$
declare
  corpus bm25_corpus;
  kept_rows bigint;
begin
  select * into corpus from bm25_corpus where id;
  truncate bm25_postings;
  insert into bm25_postings (chunk_id, lexeme, weight)
  select chunk_id, lexeme, weight from (
    select c.id as chunk_id, t.lexeme, w.weight,
           rank() over (partition by t.lexeme order by w.weight desc) as place
      from knowledge_chunks c
     cross join lateral unnest(c.fts) t
     cross join lateral (select bm25_term_weight(coalesce(array_length(t.positions, 1), 1), c.fts_length,
                                                 corpus.avgdl_indexed, corpus.k1, corpus.b) as weight) w
  ) ranked
  where place <= corpus.postings_per_lexeme;
  get diagnostics kept_rows = row_count;
  update bm25_terms set kept = 0, floor = null where kept <> 0 or floor is not null;
  update bm25_terms s
     set kept = k.n, floor = case when k.n < s.df then k.lowest end
    from (select lexeme, count(*) as n, min(weight) as lowest from bm25_postings group by lexeme) k
   where s.lexeme = k.lexeme;
  return kept_rows;
end
$$;

create or replace function bm25_postings_on_insert() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  perform bm25_postings_add((select array_agg(id) from new_rows));
  return null;
end
$$;

create or replace function bm25_postings_on_delete() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  perform bm25_postings_remove((select array_agg(id) from old_rows));
  return null;
end
$$;

-- Only rows whose text changed: a refresh step or a supersession mark leaves the postings alone.
-- (A column list, "update of content", cannot go with transition tables.)
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
    from old_rows o join new_rows n on n.id = o.id where o.fts is distinct from n.fts;
  if changed is not null then
    perform bm25_postings_remove(changed);
    perform bm25_postings_add(changed);
  end if;
  return null;
end
$$;

create or replace function bm25_postings_on_truncate() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  truncate bm25_postings;
  return null;
end
$$;

-- Named after the statistics triggers (003) so that they fire after them: the statistics
-- trigger creates and locks the bm25_terms rows these read.
drop trigger if exists knowledge_chunks_bm25_postings_insert on knowledge_chunks;
create trigger knowledge_chunks_bm25_postings_insert after insert on knowledge_chunks
  referencing new table as new_rows for each statement execute function bm25_postings_on_insert();
drop trigger if exists knowledge_chunks_bm25_postings_delete on knowledge_chunks;
create trigger knowledge_chunks_bm25_postings_delete after delete on knowledge_chunks
  referencing old table as old_rows for each statement execute function bm25_postings_on_delete();
drop trigger if exists knowledge_chunks_bm25_postings_update on knowledge_chunks;
create trigger knowledge_chunks_bm25_postings_update after update on knowledge_chunks
  referencing old table as old_rows new table as new_rows for each statement execute function bm25_postings_on_update();
drop trigger if exists knowledge_chunks_bm25_postings_truncate on knowledge_chunks;
create trigger knowledge_chunks_bm25_postings_truncate after truncate on knowledge_chunks
  for each statement execute function bm25_postings_on_truncate();

-- An existing knowledge base gets its postings once, here (not when pasted again after 030,
-- whose postings carry their community and which redefines the rebuild).
select bm25_postings_rebuild() where exists (select 1 from knowledge_chunks)
  and not exists (select 1 from information_schema.columns where table_schema = current_schema()
                   and table_name = 'bm25_postings' and column_name = 'community');

-- The rights 009 gives the other BM25 tables and functions: the service role only.
alter table bm25_postings enable row level security;
select arc_service_role_only('table', 'bm25_postings');
select arc_service_role_only('function', f)
  from unnest(array['bm25_term_weight(integer, integer, double precision, double precision, double precision)',
                    'bm25_postings_add(bigint[])', 'bm25_postings_remove(bigint[])', 'bm25_postings_rebuild()',
                    'bm25_postings_on_insert()', 'bm25_postings_on_delete()', 'bm25_postings_on_update()',
                    'bm25_postings_on_truncate()']) f;
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('012_bm25_postings', '9b97a5fe06908717')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 012_bm25_postings';
end
$arc_migration$;

-- ===== 013_drop_fts_gin.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '013_drop_fts_gin') then
    return;
  end if;
  execute $arc_sql$
-- 013: the GIN index on knowledge_chunks.fts goes. Nothing reads `fts @@` since the full-text
-- leg reads the impact-ordered postings (012_bm25_postings.sql); the index still cost every
-- insert and, at 1M chunks, 338 MB of memory the postings and HNSW index want
-- (benchmarks/scale/). The fts column stays: the BM25 triggers read its lexemes.
drop index if exists knowledge_chunks_fts_gin;
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('013_drop_fts_gin', '5c7f3725a60ee6bc')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 013_drop_fts_gin';
end
$arc_migration$;

-- ===== 014_bm25_lock_order.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '014_bm25_lock_order' and checksum = '29a11715876531a3') then
    return;
  end if;
  execute $arc_sql$
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
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('014_bm25_lock_order', '29a11715876531a3')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 014_bm25_lock_order';
end
$arc_migration$;

-- ===== 015_view_and_sequence_rights.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '015_view_and_sequence_rights') then
    return;
  end if;
  execute $arc_sql$
-- 015: the monitoring view and the identity sequences belong to the service role only, like
-- every table and function. Supabase's default privileges grant anon and authenticated
-- everything on a new view and sequence; 009 took back only SELECT on retrieval_source_mix, so
-- anon kept INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES and TRIGGER on it, and any one of them
-- lets `LOCK TABLE retrieval_source_mix IN ACCESS EXCLUSIVE MODE` lock query_log beneath it,
-- stalling the worker's log writes. 009 revoked the sequences from anon and authenticated but
-- not from PUBLIC. Applied again it changes nothing.
select arc_service_role_only('view', 'retrieval_source_mix');
select arc_service_role_only('sequence', s)
  from unnest(array[pg_get_serial_sequence('knowledge_chunks', 'id'), pg_get_serial_sequence('query_log', 'id')]) s;
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('015_view_and_sequence_rights', 'f2cb2aacaba2e810')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 015_view_and_sequence_rights';
end
$arc_migration$;

-- ===== 020_word_frequencies.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '020_word_frequencies') then
    return;
  end if;
  execute $arc_sql$
-- 020: how many chunks hold each of a few words, for the vocabulary the worker reads off the
-- knowledge base itself (worker/retrieve/vocabulary.py: "backyard" in a question and "back yard"
-- in the documents, or the reverse). One row per word: its document frequency as a BM25 lexeme,
-- 0 when no chunk holds it, -1 when it makes no lexeme at all (a stopword).
create or replace function arc_word_frequencies(words text[])
returns table (word text, df bigint)
language sql stable
set search_path = public, extensions
as $$
  select w, coalesce(max(q.df), -1)
  from unnest(words) as w
  left join lateral bm25_query_terms(w) q on true
  group by w
$$;

select arc_service_role_only('function', 'arc_word_frequencies(text[])');
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('020_word_frequencies', '7f726bb444ce5b3d')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 020_word_frequencies';
end
$arc_migration$;

-- ===== 030_communities.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '030_communities') then
    return;
  end if;
  execute $arc_sql$
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
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('030_communities', '42faeb57075edfaa')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 030_communities';
end
$arc_migration$;

-- ===== 031_hybrid_search_communities.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '031_hybrid_search_communities' and checksum = '335523c818319e51') then
    return;
  end if;
  execute $arc_sql$
-- 031: hybrid_search (004) within one community (030). The diff against 004 is only that:
--   * a parameter `community`: null means the knowledge base's one community; with several it is
--     an error (22023) naming the parameter, and so is a community that holds no chunks;
--   * both legs read that community alone, inside the SQL: the vector leg filters the HNSW scan
--     on it (iterative scans keep filling match_count), the full-text leg reads that community's
--     postings and scores with its statistics (bm25_query_terms(text, community)) and checks it
--     again as it scores. Nothing of another community is ever a candidate.
-- chunk_neighbours (005) stays within the chunk's community, and bm25_query_terms (003) takes the
-- community whose N and document frequencies give the idf.
-- arc: repeatable (function definitions and their rights: applied again whenever this file changes)
-- Earlier signatures (0.1.0; before the postings, with the rare-word selection's two
-- parameters): dropped so named calls stay unambiguous.
drop function if exists hybrid_search(text, vector, integer, double precision, double precision, text, integer,
                                      text[], boolean, boolean, integer, double precision, integer, integer);
drop function if exists hybrid_search(text, vector, integer, double precision, double precision, text, integer,
                                      text[], boolean, boolean, integer, double precision, integer, integer,
                                      text, double precision);
drop function if exists hybrid_search(text, vector, integer, double precision, double precision, text, integer,
                                      text[], boolean, boolean, integer, integer, text, double precision, integer);
drop function if exists bm25_query_terms(text);

-- PL/pgSQL, not SQL, only so that its statement is planned once a session: a SQL function that is
-- not inlined (its SET keeps it from that) is planned again on every call, about 0.2 ms of each
-- hybrid_search at 100 communities (benchmarks/scale/communities/). The same statement, and
-- the cast an SQL function's result made implicitly (ln of a numeric is a numeric), written out.
create or replace function bm25_query_terms(query_text text, community text)
returns table (lexeme text, idx integer, qtf integer, df bigint, idf double precision)
language plpgsql stable
set search_path = public, extensions
as $$
#variable_conflict use_column
begin
  return query
  select q.lexeme,
         bm25_lexeme_index(q.lexeme),
         1,
         coalesce(t.df, 0),
         ln(1 + (c.n_docs - coalesce(t.df, 0) + 0.5) / (coalesce(t.df, 0) + 0.5))::double precision
  from unnest(to_tsvector('english'::regconfig, coalesce(query_text, ''))) as q
  join bm25_corpus c on c.community = bm25_query_terms.community
  left join bm25_terms t on t.community = c.community and t.lexeme = q.lexeme;
end
$$;

create or replace function chunk_neighbours(chunk_id bigint, radius integer default 1)
returns table (
  id bigint, document_id text, document_name text, document_type text, section_path text,
  page_number integer, chunk_index integer, is_binding boolean, superseded_by text,
  content text, token_count integer, metadata jsonb
)
language sql stable
set search_path = public, extensions
as $$
  select n.id, n.document_id, n.document_name, n.document_type, n.section_path,
         n.page_number, n.chunk_index, n.is_binding, n.superseded_by,
         n.content, n.token_count, n.metadata
  from knowledge_chunks c
  join knowledge_chunks n
    on n.community = c.community
   and n.document_id = c.document_id
   and n.chunk_index between c.chunk_index - greatest(radius, 0) and c.chunk_index + greatest(radius, 0)
  where c.id = chunk_id
  order by n.chunk_index
$$;

create or replace function hybrid_search(
  query_text          text,
  query_embedding     vector default null,
  match_count         integer default 40,
  vector_weight       double precision default 0.7,
  fts_weight          double precision default 0.3,
  fusion              text default 'weighted',
  rrf_k               integer default 60,
  document_types      text[] default null,
  binding_only        boolean default false,
  include_superseded  boolean default false,
  ef_search           integer default null,
  fts_scan_limit      integer default 5000,
  expansion_text      text default null,
  expansion_weight    double precision default 0.5,
  fts_rescore         integer default null,
  community           text default null
)
returns table (
  id bigint, document_id text, document_name text, document_type text, section_path text,
  page_number integer, chunk_index integer, is_binding boolean, superseded_by text,
  content text, token_count integer, metadata jsonb,
  vector_score double precision, fts_score double precision, bm25_score double precision,
  fused_score double precision, vector_rank integer, fts_rank integer
)
language plpgsql
set search_path = public, extensions
set statement_timeout = '5s'
-- Every read below goes through an index (HNSW, the postings' impact order, primary keys); the
-- cost model, which does not see that the wide columns are TOASTed, would sometimes scan instead.
set enable_seqscan = off
-- Its two statements keep one plan each for the session: left to choose, Postgres planned them
-- afresh on every call (custom plans), about 1 ms of a 10 ms search at 100k chunks, and the
-- generic plans are no slower (benchmarks/scale/).
set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
declare
  qvec        sparsevec;
  idf_mass    double precision;
  read_words  text[];
  read_weight double precision[];
  read_count  integer[];
  read_floor  real[];
  rescore     integer;
  unread_bound    double precision;
  candidate       bigint[];
  candidate_above double precision[];
  next_at         integer := 1;
  batch_ids       bigint[];
  batch_scores    double precision[];
  scored_ids      bigint[] := '{}';
  scored          double precision[] := '{}';
  kth_score       double precision;
  rescore_step    integer := match_count;
  scope       text;
  holding     bigint;
  own_ids     bigint[];
  own_dist    double precision[];
  own_leg     regprocedure;
  leg_name    text;
  sorting     text;
  vw          double precision := coalesce(vector_weight, 0.7);
  fw          double precision := coalesce(fts_weight, 0.3);
begin
  if match_count is null or match_count < 1 or match_count > 1000 then
    raise exception 'match_count must be between 1 and 1000' using errcode = '22023';
  end if;
  if fts_scan_limit is null or fts_scan_limit < 1 then
    raise exception 'fts_scan_limit must be at least 1' using errcode = '22023';
  end if;
  if fts_rescore is not null and fts_rescore < 1 then
    raise exception 'fts_rescore must be at least 1' using errcode = '22023';
  end if;
  if fusion is null or fusion not in ('weighted', 'rrf') then
    raise exception 'fusion must be weighted or rrf' using errcode = '22023';
  end if;
  -- The community every read below is limited to.
  if hybrid_search.community is not null then
    select b.community into scope from bm25_corpus b where b.community = hybrid_search.community and b.n_docs > 0;
    if scope is null then
      raise exception 'community %: no such community in this knowledge base', hybrid_search.community
        using errcode = '22023';
    end if;
  else
    select min(b.community), count(*) into scope, holding from bm25_corpus b where b.n_docs > 0;
    if holding > 1 then
      raise exception 'community is required: this knowledge base holds % communities', holding
        using errcode = '22023';
    end if;
    if scope is null then
      return;  -- an empty knowledge base
    end if;
  end if;

  if query_embedding is null then
    vw := 0;
    fw := 1;
  end if;

  perform set_config('hnsw.ef_search',
                     least(greatest(coalesce(ef_search, 3 * match_count), match_count, 100), 1000)::text, true);
  begin
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
  exception when others then
    null;  -- pgvector < 0.8: no iterative scans; the larger ef_search above still helps
  end;

  -- A community with an HNSW index of its own (033) is searched there: planned with the
  -- community as a literal, because only then can the planner see that the partial index holds
  -- the rows asked for (a generic plan cannot), and with sorting off, without which a filtered
  -- search would rather read all the community's rows of that type through the btree and sort
  -- them. At 100 communities of 10k chunks the vector leg is p95 7.5 ms at recall@40 0.996 this
  -- way, and 94 ms at 0.955 through the global index (benchmarks/scale/communities/). That
  -- statement is the community's vector leg function (033), whose plan is kept for the session;
  -- without it (an index made by hand) the same statement is planned here on every call. The
  -- rest of the function runs as before, with the global index when the community has none of
  -- its own.
  if query_embedding is not null then
    leg_name := arc_community_vector_leg_name(scope);
    select to_regprocedure(format('%I(vector, text[], boolean, boolean, integer)', leg_name))
      into own_leg
      from pg_index i
     where i.indexrelid = to_regclass(quote_ident(arc_community_vector_index_name(scope))) and i.indisvalid;
    if found then
      if own_leg is not null then
        execute format('select array_agg(v.id order by v.distance), array_agg(v.distance order by v.distance)'
                       '  from %I($1, $2, $3, $4, $5) v', leg_name)
          into own_ids, own_dist
          using query_embedding, document_types, binding_only, include_superseded, match_count;
      else
        sorting := current_setting('enable_sort');
        perform set_config('enable_sort', 'off', true);
        execute format('select array_agg(v.id order by v.distance), array_agg(v.distance order by v.distance)'
                       '  from (%s) v', arc_community_vector_leg_statement(scope))
          into own_ids, own_dist
          using query_embedding, document_types, binding_only, include_superseded, match_count;
        perform set_config('enable_sort', sorting, true);
      end if;
      own_ids := coalesce(own_ids, '{}');
    end if;
  end if;

  rescore := least(coalesce(fts_rescore, 400), fts_scan_limit);

  -- One pass over the question's lexemes gives the BM25 query vector and what the leg reads.
  with all_terms as (
    select * from bm25_query_terms(query_text, scope)
  ), terms as (
    select t.lexeme, t.idx, t.df, t.idf * t.qtf as w from all_terms t where t.df > 0
    union all
    -- the documents' words for the question's (worker/retrieve/vocabulary.py): they find and score
    -- chunks at expansion_weight, and do not count in the normaliser below
    select e.lexeme, e.idx, e.df, e.idf * e.qtf * coalesce(expansion_weight, 0.5)
    from bm25_query_terms(expansion_text, scope) e
    where e.df > 0 and e.lexeme not in (select lexeme from all_terms)
  ), by_index as (
    select idx, sum(w) as w from terms group by idx
  ), by_length as (
    -- How many postings each word reads: fts_scan_limit shared out water-filling, shortest list
    -- first, so that a short list is read whole and what it leaves goes to the longer ones.
    select t.lexeme, t.w, l.kept as listed, l.floor,
           row_number() over (order by l.kept, t.lexeme) as place, count(*) over () as words,
           coalesce(sum(l.kept) over (order by l.kept, t.lexeme rows between unbounded preceding and 1 preceding),
                    0) as before
    -- one index lookup per word (limit 1 keeps the planner from turning it into a join, for
    -- which the generic plan read all of bm25_terms: 8 ms at 10k chunks)
    from terms t cross join lateral (
      select b.kept, b.floor from bm25_terms b where b.community = scope and b.lexeme = t.lexeme limit 1
    ) l
  ), level as (
    select coalesce((array_agg((fts_scan_limit - before)::double precision / (words - place + 1) order by place)
                       filter (where listed > (fts_scan_limit - before)::double precision / (words - place + 1)))[1],
                    'infinity') as share
    from by_length
  )
  select (select ('{' || string_agg(idx || ':' || w, ',' order by idx) || '}/999999999')::sparsevec
            from by_index),
         -- the normaliser counts every query lexeme, found in the corpus or not: a question
         -- whose one matching word is "2019" is not a full match ("who won the world series
         -- in 2019" scored fts 1.0 against governing documents when only found words counted)
         (select sum(idf * qtf) from all_terms),
         r.words, r.weights, r.counts, r.floors
    into qvec, idf_mass, read_words, read_weight, read_count, read_floor
    from (select array_agg(lexeme order by place) as words,
                 array_agg(w order by place) as weights,
                 array_agg(greatest(least(listed::double precision, floor(share)), 1)::integer order by place) as counts,
                 -- a list read whole bounds the chunks it does not hold by its floor (0: it holds them all)
                 array_agg(case when listed <= share then coalesce(floor, 0) end order by place) as floors
          from by_length, level) r;

  -- The candidates: every chunk read, with the most its BM25 score can be. A chunk missing from
  -- a word's list holds that word at most as strongly as the last posting read there (or below
  -- the list's floor, 012, when the whole list was read; not at all when that list is complete),
  -- so its bound is the sum of what was read plus those ceilings for the words it was not read in.
  with words as (
    select q.lexeme, q.w, q.n,
           -- the n-th weight of the list, where its reading stops (one index probe)
           q.w * coalesce(q.list_floor, (select b.weight from bm25_postings b
                                         where b.community = scope and b.lexeme = q.lexeme
                                          order by b.weight desc offset q.n - 1 limit 1), 0) as ceiling
    from unnest(read_words, read_weight, read_count, read_floor) as q(lexeme, w, n, list_floor)
  ), reads as (
    select q.w, q.ceiling, p.chunk_id, p.weight
    from words q
    cross join lateral (
      select b.chunk_id, b.weight from bm25_postings b
      where b.community = scope and b.lexeme = q.lexeme
      order by b.weight desc
      limit q.n
    ) p
  ), bounded as (
    -- Scored in the order of what was read of them (partial scores), which finds the best
    -- chunks sooner than their bounds do when not all can be scored: nDCG@10 among 1M
    -- distractors 0.830 against 0.821 for bound order with 400 scored (benchmarks/scale/quality/).
    select r.chunk_id, sum(r.w * r.weight) as partial, sum(r.w * r.weight - r.ceiling) as above
    from reads r
    group by r.chunk_id
    order by partial desc, r.chunk_id
    limit rescore
  )
  -- both arrays in the same order (Postgres 16 and later sort once for the two)
  select coalesce((select sum(ceiling) from words), 0),
         array_agg(chunk_id order by partial desc, chunk_id),
         array_agg(above order by partial desc, chunk_id)
  from bounded
    into unread_bound, candidate, candidate_above;

  -- Score them exactly (their stored weights) in that order until no bound left can reach the
  -- match_count-th score: the leg is then exact over every chunk read, and over the whole
  -- corpus when that score also beats unread_bound. Filters apply here, so a filtered leg stops
  -- at its own match_count-th score.
  while next_at <= coalesce(cardinality(candidate), 0) loop
    -- the highest bound among those not yet scored, taken only when there is a score to beat
    -- (a window over the candidates for every row cost more than these few looks)
    exit when kth_score is not null
              and unread_bound + (select max(a) from unnest(candidate_above[next_at:]) a) < kth_score;
    select coalesce(array_agg(c.id), '{}'), coalesce(array_agg(-(c.bm25 <#> qvec)), '{}')
      into batch_ids, batch_scores
      from knowledge_chunks c
     where c.id = any (candidate[next_at:next_at + rescore_step - 1])
       and c.community = scope
       and (document_types is null or c.document_type = any (document_types))
       and (not binding_only or c.is_binding)
       and (include_superseded or c.superseded_by is null);
    scored_ids := scored_ids || batch_ids;
    scored := scored || batch_scores;
    if cardinality(scored) >= match_count then
      select s into kth_score from unnest(scored) s order by s desc offset match_count - 1 limit 1;
    end if;
    next_at := next_at + rescore_step;
    -- a leg that did not stop after its first match_count seldom stops later (100k chunks: 350
    -- of 400 scored on average): one read for the rest, not more statements (0.2 ms at 100k)
    rescore_step := rescore;
  end loop;
  -- what the pruning saved (set client_min_messages = debug to see it)
  raise debug 'hybrid_search fts leg: % candidates, % scored, % passed the filters', coalesce(cardinality(candidate), 0),
    least(next_at - 1, coalesce(cardinality(candidate), 0)), cardinality(scored);

  return query
  with vector_leg as (
    -- the distance once: each evaluation reads the chunk's TOASTed embedding again
    select v.id, 1 - v.distance as score, (row_number() over (order by v.distance))::integer as rank
    from ((
      select c.id, c.embedding <=> query_embedding as distance
      from knowledge_chunks c
      where query_embedding is not null
        and own_ids is null  -- the community has no index of its own (033)
        -- an expression, not the bare column: at 1M chunks the planner otherwise reads every
        -- chunk of the type through the btree and sorts them (90-200 ms) instead of filtering
        -- during the HNSW scan (iterative scans keep filling the list)
        and (document_types is null or (c.document_type || '') = any (document_types))
        -- the community inside the HNSW scan too (an expression for the same reason)
        and (c.community || '') = scope
        and (not binding_only or c.is_binding)
        and (include_superseded or c.superseded_by is null)
      order by c.embedding <=> query_embedding
      limit match_count
    ) union all
      select o.id, o.distance from unnest(own_ids, own_dist) as o(id, distance)
    ) v
  ), fts_leg as (
    select f.id, f.score, (row_number() over (order by f.score desc, f.id))::integer as rank
    from unnest(scored_ids, scored) as f(id, score)
    order by f.score desc, f.id
    limit match_count
  ), joined as (
    select coalesce(v.id, f.id) as id,
           v.score as vector_score,
           case when f.score is not null then least(f.score / nullif(idf_mass, 0), 1.0) end as fts_score,
           f.score as bm25_score,
           v.rank as vector_rank,
           f.rank as fts_rank
    from vector_leg v
    full outer join fts_leg f on f.id = v.id
  ), normalised as (
    -- min-max within this candidate list; a chunk missing from a leg gets 0 for it
    select j.*,
           case when j.vector_score is null then 0.0 else coalesce(
             (j.vector_score - min(j.vector_score) over ()) /
             nullif(max(j.vector_score) over () - min(j.vector_score) over (), 0), 1.0) end as vector_norm,
           case when j.bm25_score is null then 0.0 else coalesce(
             (j.bm25_score - min(j.bm25_score) over ()) /
             nullif(max(j.bm25_score) over () - min(j.bm25_score) over (), 0), 1.0) end as fts_norm
    from joined j
  )
  select c.id, c.document_id, c.document_name, c.document_type, c.section_path,
         c.page_number, c.chunk_index, c.is_binding, c.superseded_by,
         c.content, c.token_count, c.metadata,
         n.vector_score, n.fts_score, n.bm25_score,
         case when fusion = 'rrf' then
                coalesce(vw / (rrf_k + n.vector_rank), 0) + coalesce(fw / (rrf_k + n.fts_rank), 0)
              else
                (vw * n.vector_norm + fw * n.fts_norm) / nullif(vw + fw, 0)
         end as fused_score,
         n.vector_rank, n.fts_rank
  from normalised n
  join knowledge_chunks c on c.id = n.id
  order by 16 desc, 1;
end
$$;

select arc_service_role_only('function', 'bm25_query_terms(text, text)');

-- A new signature is a new function, which PUBLIC may execute: the rights 009 gives, again, so
-- that an upgrade (this file applied after 009) does not open it to anon.
select arc_service_role_only('function', p.oid::regprocedure::text)
  from pg_proc p
 where p.pronamespace = 'public'::regnamespace and p.proname = 'hybrid_search';
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('031_hybrid_search_communities', '335523c818319e51')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 031_hybrid_search_communities';
end
$arc_migration$;

-- ===== 032_word_frequencies_communities.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '032_word_frequencies_communities' and checksum = 'f41e3c65177b6184') then
    return;
  end if;
  execute $arc_sql$
-- 032: 020's word frequencies within one community. 030 keys bm25_terms by community and 031
-- drops bm25_query_terms(text), which 020's function read, so the vocabulary (worker/retrieve/
-- vocabulary.py) would count words of the whole knowledge base, or fail. A community reads its own
-- documents' spelling ("back yard" in one association's bylaws, "backyard" in another's); null
-- (a knowledge base of one community, or an old caller) sums each word over every community.
-- arc: repeatable (a function definition and its rights: applied again whenever this file changes)
drop function if exists arc_word_frequencies(text[]);

create or replace function arc_word_frequencies(words text[], community text default null)
returns table (word text, df bigint)
language sql stable
set search_path = public, extensions
as $$
  select w.word,
         case when not exists (select 1 from unnest(to_tsvector('english'::regconfig, w.word)))
              then -1  -- no lexeme at all: a stopword
              else coalesce((select max(s.df)
                             from (select sum(t.df) as df
                                   from unnest(to_tsvector('english'::regconfig, w.word)) q
                                   join bm25_terms t on t.lexeme = q.lexeme
                                   where arc_word_frequencies.community is null
                                      or t.community = arc_word_frequencies.community
                                   group by q.lexeme) s), 0)
         end::bigint
  from unnest(words) as w(word)
$$;

select arc_service_role_only('function', 'arc_word_frequencies(text[], text)');
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('032_word_frequencies_communities', 'f41e3c65177b6184')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 032_word_frequencies_communities';
end
$arc_migration$;

-- ===== 033_community_vector_indexes.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '033_community_vector_indexes' and checksum = '4b838dce0b501eef') then
    return;
  end if;
  execute $arc_sql$
-- 033: every community of a knowledge base of several gets an HNSW index of its own.
--
-- 031 filters the one HNSW index on the community while it scans (pgvector 0.8's iterative
-- scans keep going until match_count rows pass). That is right while a community is much of the
-- index; a community that is a small share of it (100 communities of 10k chunks: 1%) makes the
-- scan walk past other communities' chunks, nearly all of them: at 1M chunks the vector leg
-- took 94 ms p95 for a recall@40 of 0.955 (some questions 0.575), and neither strict order, a
-- larger ef_search nor hnsw.max_scan_tuples helped (benchmarks/scale/communities/). A partial
-- index per community (`where community = '...'`) holds that community's graph alone: the
-- vector leg searches 10k chunks, not 1M: 7.5 ms p95 at recall@40 0.996 there. hybrid_search
-- (031) reads the community's own index when there is one and the global index otherwise.
--
-- When: a knowledge base of one community keeps only the global index (it is that community's
-- index; a second one would hold the same rows). At the commit of a load that brings a second
-- community (or any later one), every community holding chunks and no index of its own gets one
-- (a deferred trigger: CREATE INDEX cannot run while the load's statement still uses the table).
-- The first community's index is built then, once; any build reads the whole table to find its
-- community's rows (6 s for 10k chunks among 1M here, the table's 1.5 GB read included), and
-- holds off other writers (never searches) until the load commits. A build that fails
-- (rights, memory) leaves the community on the global index and lets the load commit; call
-- `select arc_community_vector_indexes()` to try again. The global index stays: it answers a
-- community without an index of its own; drop it only if every community has one.
-- arc: repeatable (function definitions, a trigger and their rights: applied again whenever this file changes)

-- The names of a community's objects: readable in \di and \df, and at most 63 characters for
-- any community name (030) after either prefix below. (The cut at 41 characters stays as it was
-- first written: a name that changed would orphan an existing index or leg.)
create or replace function arc_community_object_name(prefix text, community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select prefix || case when length(community) <= 41 then community
                        else left(community, 32) || '_' || left(md5(community), 8) end
$$;

create or replace function arc_community_vector_index_name(community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select arc_community_object_name('knowledge_chunks_hnsw_', community)
$$;

-- The community's vector leg, as a function of its own: the statement hybrid_search (031) would
-- otherwise plan on every call (EXECUTE), with the community as a literal so that the plan reads
-- the partial index, and sorting off (else a type filter reads the community through the btree).
-- Here that plan is made once a session and kept: planning it looks at every index of
-- knowledge_chunks, one per community, about 0.7 ms of each search at 100 communities and
-- growing with their number (benchmarks/scale/communities/).
create or replace function arc_community_vector_leg_name(community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select arc_community_object_name('arc_vector_leg_', community)
$$;

-- The leg's statement, in one place for the leg function below and for 031, which plans it
-- itself for an index made by hand (one without a leg): $1 the question's vector, $2 the
-- document types (null: any), $3 binding only, $4 superseded included, $5 how many rows.
create or replace function arc_community_vector_leg_statement(community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select format('select c.id, c.embedding <=> $1 as distance
                   from knowledge_chunks c
                  where c.community = %L
                    and ($2 is null or (c.document_type || '''') = any ($2))
                    and (not $3 or c.is_binding)
                    and ($4 or c.superseded_by is null)
                  order by c.embedding <=> $1
                  limit $5', community)
$$;

create or replace function arc_community_vector_leg(community text)
returns text
language plpgsql
set search_path = public, extensions
as $$
declare
  name text := arc_community_vector_leg_name(community);
begin
  execute format($f$
    create or replace function %I(query_embedding vector, document_types text[], binding_only boolean,
                                  include_superseded boolean, match_count integer)
    returns table (id bigint, distance double precision)
    language plpgsql stable
    set search_path = public, extensions
    set enable_seqscan = off
    set enable_sort = off
    set plan_cache_mode = force_generic_plan
    as $body$
    begin
      return query %s;
    end
    $body$
  $f$, name, arc_community_vector_leg_statement(community));
  perform arc_service_role_only('function', format('%I(vector, text[], boolean, boolean, integer)', name));
  return name;
end
$$;

-- Make the community's index if it has none (same opclass, m and ef_construction as 002's), and
-- its vector leg.
create or replace function arc_community_vector_index(community text)
returns text
language plpgsql
set search_path = public, extensions
as $$
declare
  name text := arc_community_vector_index_name(community);
begin
  if to_regclass(quote_ident(name)) is null then
    execute format('create index %I on knowledge_chunks using hnsw (embedding vector_cosine_ops) '
                   'with (m = 16, ef_construction = 64) where community = %L', name, community);
  end if;
  perform arc_community_vector_leg(community);
  return name;
end
$$;

-- Every community holding chunks gets its index, once the knowledge base holds several.
-- Returns the communities it made an index for. (A community with an index and no vector leg,
-- from before the legs were made, gets its leg, quietly.)
create or replace function arc_community_vector_indexes()
returns setof text
language plpgsql
set search_path = public, extensions
as $$
declare
  c text;
begin
  if (select count(*) from bm25_corpus where n_docs > 0) < 2 then
    return;
  end if;
  for c in select b.community from bm25_corpus b
            where b.n_docs > 0 and to_regclass(quote_ident(arc_community_vector_index_name(b.community))) is null
            order by b.community loop
    perform arc_community_vector_index(c);
    return next c;
  end loop;
  for c in select b.community from bm25_corpus b
            where to_regclass(quote_ident(arc_community_vector_index_name(b.community))) is not null
              and to_regprocedure(format('%I(vector, text[], boolean, boolean, integer)',
                                         arc_community_vector_leg_name(b.community))) is null
            order by b.community loop
    perform arc_community_vector_leg(c);
  end loop;
end
$$;

create or replace function arc_community_vector_indexes_on_commit() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  begin
    perform arc_community_vector_indexes();
  exception when others then
    raise warning 'arc-retrieval: no vector index of its own for a community (%): it is searched through the '
                  'global index; run select arc_community_vector_indexes() to try again', sqlerrm;
  end;
  return null;
end
$$;

-- A community's first chunks (030 counts them in its corpus row) defer the index to the end of
-- the transaction.
drop trigger if exists bm25_corpus_community_vector_index on bm25_corpus;
create constraint trigger bm25_corpus_community_vector_index
  after update of n_docs on bm25_corpus deferrable initially deferred
  for each row when (old.n_docs = 0 and new.n_docs > 0)
  execute function arc_community_vector_indexes_on_commit();

-- A knowledge base already holding several communities gets their indexes now.
select arc_community_vector_indexes();

select arc_service_role_only('function', f)
  from unnest(array['arc_community_object_name(text, text)', 'arc_community_vector_index_name(text)',
                    'arc_community_vector_index(text)', 'arc_community_vector_leg_name(text)',
                    'arc_community_vector_leg_statement(text)', 'arc_community_vector_leg(text)',
                    'arc_community_vector_indexes()', 'arc_community_vector_indexes_on_commit()']) f;
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('033_community_vector_indexes', '4b838dce0b501eef')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 033_community_vector_indexes';
end
$arc_migration$;

-- ===== 034_calibration_sample.sql =====
do $arc_migration$
begin
  if exists (select 1 from schema_migrations where name = '034_calibration_sample' and checksum = '6ac355c502f19293') then
    return;
  end if;
  execute $arc_sql$
-- 034: the chunks a status calibration asks back, as a function PostgREST can serve.
--
-- The worker calibrates its status on each knowledge base (worker/retrieve/confidence.py): it
-- asks a fixed sample of the knowledge base's own sentences back, by the path a question takes.
-- A worker on Supabase reads only through RPC functions, so without this one it had no sample
-- and kept the fixed thresholds that do not carry from one document set to another.
-- The sample is chosen by what a chunk is (document and position), not by its id, so a
-- community gets the same sample, and the same calibration, in a database of its own as beside
-- others whose chunks take ids in between. Superseded chunks are never asked back.
-- arc: repeatable (a function definition and its rights: applied again whenever this file changes)

create or replace function arc_calibration_chunks(sample_size integer, community text default null)
returns table (content text)
language sql stable
set search_path = public, extensions
as $$
  select c.content
  from knowledge_chunks c
  where c.superseded_by is null
    and (arc_calibration_chunks.community is null or c.community = arc_calibration_chunks.community)
  order by md5(c.document_id || ':' || c.chunk_index::text)
  limit greatest(least(sample_size, 10000), 0)
$$;

select arc_service_role_only('function', 'arc_calibration_chunks(integer, text)');
$arc_sql$;
  insert into schema_migrations (name, checksum) values ('034_calibration_sample', '6ac355c502f19293')
    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();
  raise notice 'arc-retrieval: applied 034_calibration_sample';
end
$arc_migration$;
