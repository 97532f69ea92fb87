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
