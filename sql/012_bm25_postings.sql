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
