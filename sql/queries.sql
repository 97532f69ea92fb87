-- The worker's own statements, loaded by name (worker/store/sqlfiles.py). Parameters are named
-- (%(name)s) and always bound, never formatted into the text.

-- name: create_migrations_table
create table if not exists schema_migrations (
  name        text primary key,
  checksum    text not null,
  applied_at  timestamptz not null default now()
)

-- name: function_bodies_unchecked
-- The functions are created before the tables they read (worker/store/sqlfiles.py), as pg_dump does.
set check_function_bodies = off

-- name: lock_migrations
select pg_advisory_xact_lock(hashtext('arc-retrieval:migrations'))

-- name: applied_migrations
select name, checksum from schema_migrations

-- name: record_migration
insert into schema_migrations (name, checksum) values (%(name)s, %(checksum)s)
on conflict (name) do update set checksum = excluded.checksum, applied_at = now()

-- name: embedding_type
select format_type(a.atttypid, a.atttypmod)
from pg_attribute a
where a.attrelid = to_regclass('knowledge_chunks') and a.attname = 'embedding' and not a.attisdropped

-- name: ping
select 1

-- name: lock_writes
-- Taken first, holding nothing else, by every transaction of ours that writes knowledge_chunks.
-- Each write holds the BM25 corpus row until commit (014), so writers queued there anyway; a
-- writer that waited for a per-document lock, or for another document's rows (supersession and
-- amendment marks), while holding that row could deadlock with one holding what it waited for.
select pg_advisory_xact_lock(hashtext('arc-retrieval:writes'))

-- name: write_lock_wait
-- Before lock_writes: its wait is bounded by lock_timeout (ARC_WRITE_LOCK_WAIT), not by the
-- statement timeout, which is for one statement's work: a writer queued behind a long load waits
-- for it, and past the bound fails with lock_not_available, which says why.
select set_config('statement_timeout', '0', true), set_config('lock_timeout', %(wait)s, true)

-- name: write_lock_taken
select set_config('statement_timeout', %(statement_timeout)s, true), set_config('lock_timeout', '0', true)

-- name: delete_document
delete from knowledge_chunks where community = %(community)s and document_id = %(document_id)s

-- name: copy_chunks
copy knowledge_chunks (community, document_id, document_name, document_type, section_path, page_number,
                       chunk_index, is_binding, superseded_by, content, token_count, metadata,
                       embedding)
from stdin

-- name: mark_superseded
update knowledge_chunks set superseded_by = %(superseded_by)s
where community = %(community)s and document_id = %(document_id)s and superseded_by is distinct from %(superseded_by)s

-- name: stored_documents
-- Which of these ids name a stored document (one index probe each).
select wanted.document_id from unnest(%(ids)s::text[]) as wanted(document_id)
where exists (select 1 from knowledge_chunks k
              where k.community = %(community)s and k.document_id = wanted.document_id)

-- name: stored_sources
-- What each of these ids holds now: its name and the file it came from (chunk 0 carries both).
select document_id, document_name, metadata->>'source_file' from knowledge_chunks
where community = %(community)s and document_id = any(%(ids)s::text[]) and chunk_index = 0

-- name: same_text_documents
-- Documents of the community, other than these ids, whose first chunk is one of these (md5), with
-- the md5 of their whole text: the caller compares it with its own to find a document stored twice.
select document_id, min(document_name), md5(string_agg(content, chr(10) order by chunk_index))
from knowledge_chunks
where community = %(community)s and not (document_id = any(%(ids)s::text[]))
  and document_id in (select document_id from knowledge_chunks
                      where community = %(community)s and chunk_index = 0
                        and md5(content) = any(%(firsts)s::text[]))
group by document_id

-- name: superseding_document
-- Its current mark (a re-ingest keeps it), else a document that declared it supersedes this one
-- before this one was ever ingested (its first chunk records "supersedes"; indexed: 011).
select coalesce(
  (select superseded_by from knowledge_chunks
   where community = %(community)s and document_id = %(document_id)s and superseded_by is not null limit 1),
  (select document_id from knowledge_chunks
   where community = %(community)s and chunk_index = 0 and metadata ? 'supersedes' and metadata ->> 'supersedes' = %(document_id)s
     and document_id <> %(document_id)s
   limit 1))

-- name: bm25_seed_avgdl
select bm25_seed_avgdl(%(sections)s::text[], %(contents)s::text[], %(community)s)

-- name: bm25_refresh
select bm25_refresh(%(force)s, %(community)s)

-- name: bm25_refresh_step
select bm25_refresh_step(%(max_rows)s, %(community)s)

-- name: bm25_stale_chunks
select bm25_stale_chunks(%(community)s)

-- name: hybrid_search
-- The full-text leg also reads the question's compounds as the knowledge base spells them.
select * from hybrid_search(
  query_text         => %(query_text)s,
  query_embedding    => %(query_embedding)s::vector,
  match_count        => %(match_count)s,
  vector_weight      => %(vector_weight)s,
  fts_weight         => %(fts_weight)s,
  fusion             => %(fusion)s,
  document_types     => %(document_types)s::text[],
  binding_only       => %(binding_only)s,
  include_superseded => %(include_superseded)s,
  expansion_text     => nullif(concat_ws(' ', nullif(%(expansion_text)s::text, ''),
                                 nullif(array_to_string(arc_compound_spellings(%(compound_words)s::text[],
                                                                               %(community)s::text), ' '), '')), ''),
  community          => %(community)s,
  filter_as_of       => %(filter_as_of)s::date
)

-- name: chunk_neighbours
select * from chunk_neighbours(chunk_id => %(chunk_id)s, radius => %(radius)s)

-- name: insert_query_log
insert into query_log (community, request_id, query, normalized_query, query_type, status, best_score,
                       result_count, candidate_count, both_legs_count, vector_only_count,
                       fts_only_count, avg_vector_score, avg_fts_score, reranked, warnings, timings_ms, sources)
values (%(community)s, %(request_id)s, %(query)s, %(normalized_query)s, %(query_type)s, %(status)s, %(best_score)s,
        %(result_count)s, %(candidate_count)s, %(both_legs_count)s, %(vector_only_count)s,
        %(fts_only_count)s, %(avg_vector_score)s, %(avg_fts_score)s, %(reranked)s, %(warnings)s,
        %(timings_ms)s, %(sources)s)

-- name: knowledge_base_empty
select not exists (select 1 from knowledge_chunks)

-- name: replica_position
-- How far a read replica has replayed: the knowledge base's version, and Postgres's replay lag
-- (null on a primary; on a replica it also grows while the primary has nothing to send).
select knowledge_base_version() as version,
       extract(epoch from now() - pg_last_xact_replay_timestamp()) as lag

-- name: knowledge_base_size
select count(distinct document_id), count(*) from knowledge_chunks

-- name: knowledge_base_version
select knowledge_base_version()

-- name: community_version
-- One community's counter (030): a load of another community leaves its cached searches valid.
select knowledge_base_version(%(community)s::text)

-- name: communities
-- The communities holding chunks (030), with their chunk counts.
select community, chunks from knowledge_communities order by community

-- name: list_documents
select document_id, min(document_name), min(document_type), bool_and(is_binding), min(superseded_by),
       count(*), max(page_number), min(created_at), min(metadata ->> 'source_file'),
       string_agg(distinct metadata ->> 'amended_by', ','), min(metadata ->> 'effective_date')
from knowledge_chunks
where community = %(community)s and (%(document_id)s::text is null or document_id = %(document_id)s)
group by document_id
order by document_id

-- name: document_chunks
select id, chunk_index, section_path, page_number, token_count, content
from knowledge_chunks where community = %(community)s and document_id = %(document_id)s order by chunk_index

-- name: release_superseded
update knowledge_chunks set superseded_by = null where community = %(community)s and superseded_by = %(document_id)s

-- name: amendments_of
-- The amendments recorded against a document: each amending document's first chunk carries
-- its "amends" list in metadata, whichever of the two was ingested first (indexed: 011).
select document_id, document_name, metadata -> 'amends'
from knowledge_chunks
where community = %(community)s and chunk_index = 0 and metadata ? 'amends'
  and metadata -> 'amends' @> jsonb_build_array(jsonb_build_object('document_id', %(document_id)s::text))

-- name: document_sections
select id, section_path from knowledge_chunks where community = %(community)s and document_id = %(document_id)s

-- name: mark_amended
-- A section amended twice keeps the amendment that took effect first: from that day on the
-- original text was no longer in force (arc_in_force). Undated amendments: the last one marks.
update knowledge_chunks c
set metadata = c.metadata || jsonb_build_object('amended_by', %(amended_by)s::text, 'amended_by_name', %(amended_by_name)s::text)
where c.id = any(%(ids)s)
  and not exists (
        select 1 from knowledge_chunks earlier, knowledge_chunks this
         where earlier.community = c.community and earlier.chunk_index = 0
           and earlier.document_id = c.metadata ->> 'amended_by' and earlier.document_id <> %(amended_by)s
           and this.community = c.community and this.chunk_index = 0 and this.document_id = %(amended_by)s
           and (earlier.metadata ->> 'effective_date')::date < (this.metadata ->> 'effective_date')::date)

-- name: release_amended
update knowledge_chunks set metadata = metadata - 'amended_by' - 'amended_by_name'
where community = %(community)s and metadata ->> 'amended_by' = %(document_id)s

-- name: recent_questions
-- The keeper's page: the latest questions of one community (a row logged before communities
-- belongs to default, as its documents do), optionally of one status (the ones the documents do
-- not answer are the no_results and low_confidence ones) or only those the chat voted unhelpful,
-- with the chat's helpful and unhelpful votes on each (answer_feedback, by request id), and the
-- context's chunks that are still there, in [SOURCE n] order (093), for the keeper to confirm one.
select created_at, query, status, best_score, result_count, both_legs_count, vector_only_count,
       fts_only_count, (timings_ms ->> 'total')::float as total_ms,
       (select count(*) filter (where f.helpful) from answer_feedback f where f.request_id = q.request_id),
       (select count(*) filter (where not f.helpful) from answer_feedback f where f.request_id = q.request_id),
       coalesce((select json_agg(json_build_object('source', s.n, 'id', k.id, 'document_id', k.document_id,
                                                   'section_path', k.section_path) order by s.n)
                 from unnest(q.sources) with ordinality s(id, n)
                 join knowledge_chunks k on k.id = s.id and k.community = coalesce(q.community, 'default')),
                '[]'::json) as sources
from query_log q
where (community = %(community)s or (community is null and %(community)s::text = 'default'))
  and (%(status)s::text is null or status = %(status)s)
  and (not %(unhelpful)s or exists (select 1 from answer_feedback f
                                    where f.request_id = q.request_id and not f.helpful))
order by created_at desc
limit %(limit)s

-- name: status_mix
-- Per day for two weeks, of one community: how many questions, each status's share, the mean
-- top-1 relevance, and where the chunks came from (both legs, vector only, full text only).
select created_at::date as day, count(*) as questions,
       avg((status = 'success')::int) as success, avg((status = 'low_confidence')::int) as low_confidence,
       avg((status = 'no_results')::int) as no_results, avg(best_score) as best_score,
       sum(both_legs_count)::float / nullif(sum(candidate_count), 0) as both_legs,
       sum(vector_only_count)::float / nullif(sum(candidate_count), 0) as vector_only,
       sum(fts_only_count)::float / nullif(sum(candidate_count), 0) as fts_only
from query_log
where created_at > now() - interval '14 days'
  and (community = %(community)s or (community is null and %(community)s::text = 'default'))
group by 1
order by 1 desc

-- name: compound_spellings
select arc_compound_spellings(%(words)s::text[], %(community)s::text)

-- name: calibration_chunks
-- A fixed sample of the chunks a status calibration asks back (034, which Supabase's RPC serves too).
select content from arc_calibration_chunks(%(limit)s, %(community)s::text)

-- name: keeper_session_start
-- A sign-in: its session, and away with those idle past the limit.
with expired as (
  delete from keeper_sessions where last_seen < now() - make_interval(secs => %(idle_seconds)s)
)
insert into keeper_sessions (session_hash) values (%(session_hash)s)

-- name: keeper_session_touch
-- A page asked for: the session goes on only when it exists and was used within the limit.
update keeper_sessions set last_seen = now()
where session_hash = %(session_hash)s and last_seen >= now() - make_interval(secs => %(idle_seconds)s)
returning 1

-- name: keeper_session_end
delete from keeper_sessions where session_hash = %(session_hash)s

-- name: model_record_tables
-- Whether the chunk table and the model record (040) exist yet.
select to_regclass('knowledge_chunks') is not null, to_regclass('knowledge_base_model') is not null

-- name: recorded_embedding_model
-- The model that wrote knowledge_chunks.embedding (040), if recorded.
select model, dim from knowledge_base_model where id

-- name: record_embedding_model
insert into knowledge_base_model (id, model, dim) values (true, %(model)s, %(dim)s)
on conflict (id) do update set model = excluded.model, dim = excluded.dim, recorded_at = now()
where knowledge_base_model.model is distinct from excluded.model or knowledge_base_model.dim <> excluded.dim

-- name: chunks_to_embed
-- What `arc-retrieval reembed` embeds again: every chunk, its document's name and section path.
select id, document_name, section_path, content from knowledge_chunks order by id

-- name: chunk_ids
select id from knowledge_chunks

-- name: set_embeddings
update knowledge_chunks c set embedding = v.embedding::vector
from unnest(%(ids)s::bigint[], %(embeddings)s::text[]) as v(id, embedding)
where c.id = v.id

-- name: status_calibration
-- A community's stored status calibration for one embedding model, and its version now (036).
select * from arc_status_calibration(%(community)s::text, %(embedding_model)s::text)

-- name: stale_status_calibrations
select community, current_version from arc_stale_status_calibrations(%(embedding_model)s::text)

-- name: claim_status_calibration
select arc_claim_status_calibration(%(community)s::text, %(embedding_model)s::text, %(kb_version)s::bigint,
                                    %(lease_seconds)s::double precision)

-- name: store_status_calibration
select arc_store_status_calibration(%(community)s::text, %(embedding_model)s::text, %(kb_version)s::bigint,
                                    %(floor)s::double precision, %(match)s::double precision,
                                    %(near_miss)s::double precision, %(questions)s::integer,
                                    %(too_small)s::boolean, %(measured_ms)s::integer,
                                    %(rerank_floor)s::double precision, %(rerank_match)s::double precision,
                                    %(rerank_near_miss)s::double precision, %(rerank_failure)s::text)

-- name: language_scales
-- A community's stored language scales for one embedding model at one version (043).
select language, floor, match, near_miss, language_drop, pairs
from arc_language_scales(%(community)s::text, %(embedding_model)s::text, %(kb_version)s::bigint)

-- name: store_language_scale
select arc_store_language_scale(%(community)s::text, %(embedding_model)s::text, %(language)s::text,
                                %(kb_version)s::bigint, %(floor)s::double precision,
                                %(match)s::double precision, %(near_miss)s::double precision,
                                %(language_drop)s::double precision, %(pairs)s::integer)

-- name: community_overview
-- The keeper's chooser: each community with its documents, chunks, last ingest and the questions
-- of the last seven days (a row logged before communities belongs to default, as its documents do).
select k.community, count(distinct k.document_id) as documents, count(*) as chunks,
       max(k.created_at) as last_ingest,
       (select count(*) from query_log q
        where (q.community = k.community or (q.community is null and k.community = 'default'))
          and q.created_at > now() - interval '7 days') as questions_week
from knowledge_chunks k
group by k.community
order by k.community

-- name: backup_tables
-- The knowledge base's tables (schema public, none of an extension's), whatever migrations made
-- them: a backup counts the rows of each, a restore checks them.
select c.relname
from pg_class c
join pg_namespace n on n.oid = c.relnamespace
where n.nspname = 'public' and c.relkind in ('r', 'p')
  and not exists (select 1 from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
order by c.relname

-- name: backup_restore_lock
-- A restore holds the writers' lock (lock_writes) for its whole transaction: no ingest or delete
-- interleaves with it; searches wait only for the moment each table is replaced.
select pg_advisory_xact_lock(hashtext('arc-retrieval:writes'))

-- name: backup_versions_before
-- Each community's knowledge-base version before a restore replaces it (asked only where the
-- table exists: backup_has_versions).
select s.community, s.version from knowledge_base_state s

-- name: backup_has_versions
select to_regclass('public.knowledge_base_state') is not null

-- name: backup_version_past
-- After a restore: a community's restored version moves past the one a serving worker knew, so
-- no search cached under that number is served over the restored chunks.
update knowledge_base_state set version = %(version)s + 1, changed_at = now()
where community = %(community)s and version <= %(version)s

-- name: backup_rights
-- After a restore (made without the archive's grants, which name roles the target may lack):
-- every table, view, sequence and function of the knowledge base gets the rights a fresh install
-- gives it (arc_service_role_only), on Supabase as on plain Postgres.
do $$
declare
  r record;
begin
  for r in
    select case c.relkind when 'v' then 'view' when 'S' then 'sequence' else 'table' end as kind,
           format('public.%I', c.relname) as name
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'p', 'v', 'S')
      and not exists (select 1 from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
    union all
    select 'function', p.oid::regprocedure::text
    from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname = 'public' and p.prokind = 'f'
      and not exists (select 1 from pg_depend d where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
  loop
    perform arc_service_role_only(r.kind, r.name);
  end loop;
end
$$

-- name: document_dates
select * from arc_document_dates(%(community)s, %(ids)s::text[])

-- name: documents_replacing
-- The stored documents that declare they supersede or amend one of these (their first chunk
-- records it, 011), with their effective dates: an ingest checks none is dated before what it replaces.
select document_id, (metadata ->> 'effective_date')::date,
       case when metadata ->> 'supersedes' = any (%(ids)s::text[]) then metadata ->> 'supersedes'
            else (select a ->> 'document_id' from jsonb_array_elements(metadata -> 'amends') a
                   where a ->> 'document_id' = any (%(ids)s::text[]) limit 1) end
from knowledge_chunks
where community = %(community)s and chunk_index = 0
  and (metadata ->> 'supersedes' = any (%(ids)s::text[])
       or exists (select 1 from jsonb_array_elements(coalesce(metadata -> 'amends', '[]')) a
                   where a ->> 'document_id' = any (%(ids)s::text[])))


-- name: confirmations
-- A community's confirmations with their state today (sql/functions/arc_confirmations.sql).
select * from arc_confirmations(%(community)s)

-- name: confirmation_chunk
-- The chunk a keeper confirms, within the community (another community's id is none).
select id, document_id, chunk_index, section_path, md5(content), content
from knowledge_chunks where community = %(community)s and id = %(chunk_id)s

-- name: upsert_confirmation
-- A "none" keeps the documents the community held (a document gained later makes it stale).
insert into answer_confirmations (community, query, answer, document_id, chunk_index, section_path,
                                  content_md5, embedding, embedding_model, documents_then)
values (%(community)s, %(query)s, %(answer)s, %(document_id)s, %(chunk_index)s, %(section_path)s,
        %(content_md5)s, %(embedding)s, %(embedding_model)s,
        case when %(answer)s = 'none' then
          coalesce((select array_agg(distinct k.document_id order by k.document_id)
                      from knowledge_chunks k where k.community = %(community)s), '{}') end)
on conflict (community, lower(query)) do update
set query = excluded.query, answer = excluded.answer, document_id = excluded.document_id,
    chunk_index = excluded.chunk_index, section_path = excluded.section_path,
    content_md5 = excluded.content_md5, embedding = excluded.embedding,
    embedding_model = excluded.embedding_model, documents_then = excluded.documents_then, created_at = now()
returning id

-- name: delete_confirmation
delete from answer_confirmations where id = %(id)s and (%(community)s::text is null or community = %(community)s)
returning community

-- name: confirmation_community
select community from answer_confirmations where id = %(id)s

-- name: logged_request
-- The community of an answer the worker logged under this request id (none: not one of ours).
select community from query_log where request_id = %(request_id)s order by id desc limit 1

-- name: insert_feedback
insert into answer_feedback (request_id, community, helpful, source)
values (%(request_id)s, %(community)s, %(helpful)s, %(source)s)
returning id, created_at

-- name: community_chunk_texts
select id, document_id, content from knowledge_chunks where community = %(community)s order by document_id, chunk_index

-- name: confirmation_stamp
-- What a process's copy of a community's confirmations is kept for (arc_confirmation_stamp).
select arc_confirmation_stamp(%(community)s::text)

-- name: store_fitted_cut
-- The success cut a community's confirmed questions fitted on its calibration at one version (092).
select arc_store_fitted_cut(%(community)s::text, %(embedding_model)s::text, %(kb_version)s::bigint,
                            %(success_at)s::double precision, %(answerable)s::integer,
                            %(unanswerable)s::integer, %(loo_accuracy)s::double precision,
                            %(configured_accuracy)s::double precision, %(configured_at)s::double precision,
                            %(gained)s::integer, %(lost)s::integer)

-- name: answer
-- A question's one round trip (arc_answer): the search and what else the answer reads.
select arc_answer(
  query_text         => %(query_text)s,
  query_embedding    => %(query_embedding)s::vector,
  match_count        => %(match_count)s,
  vector_weight      => %(vector_weight)s,
  fts_weight         => %(fts_weight)s,
  fusion             => %(fusion)s,
  document_types     => %(document_types)s::text[],
  binding_only       => %(binding_only)s,
  include_superseded => %(include_superseded)s,
  expansion_text     => %(expansion_text)s,
  community          => %(community)s,
  filter_as_of       => %(filter_as_of)s::date,
  compound_words     => %(compound_words)s::text[],
  calibration_model  => %(calibration_model)s,
  known_version      => %(known_version)s::bigint,
  neighbours_of      => %(neighbours_of)s,
  neighbours_leg_top => %(neighbours_leg_top)s,
  neighbours_depth   => %(neighbours_depth)s,
  min_version        => %(min_version)s::bigint
)
