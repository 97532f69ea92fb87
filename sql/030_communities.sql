-- 030: several communities (associations) in one knowledge base.
--
-- Every chunk carries a community key, and everything BM25 counts is counted per community: N,
-- the summed lengths and avgdl (bm25_corpus, one row per community), the document frequencies
-- (bm25_terms) and the impact-ordered postings (bm25_postings). Sister associations' near-identical
-- bylaws then never share one ranking: loading one community moves no number another ranks with.
-- The knowledge-base version (008) is per community too, so a load invalidates only its own
-- community's cached searches. hybrid_search applies the community inside both legs.
--
-- An existing single-community database upgrades in place: every row it holds gets the
-- community 'default' (a column with a constant default costs no table rewrite), its statistics
-- become that community's row, nothing is re-ingested. One lock order for every writer: it
-- takes its communities' corpus rows first (in name order), then their words, then their
-- version rows; a refresh step takes its community's version row first and never a corpus row.
--
-- Pasted again with every other file (`db sql`), it changes nothing: each step checks what is
-- there. This file makes the tables, views and triggers; the functions the triggers run, and the
-- per-community BM25, maintenance and version functions, are in sql/functions/.

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

-- ---- statistics triggers (003), per community --------------------------------------------------
-- A chunk moved to another community is weighted with that community's avgdl.
drop trigger if exists knowledge_chunks_bm25_weights on knowledge_chunks;
create trigger knowledge_chunks_bm25_weights
  before insert or update of section_path, content, community on knowledge_chunks
  for each row execute function bm25_chunk_weights();

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

-- ---- the knowledge-base version (008), per community -------------------------------------------
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

-- ---- postings (012) of a knowledge base that had none -----------------------------------------
-- A knowledge base made before 012 gets its postings here, once they carry their community.
select bm25_postings_rebuild()
 where exists (select 1 from knowledge_chunks) and not exists (select 1 from bm25_postings);
