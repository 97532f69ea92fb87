-- arc_delete_community: everything the knowledge base keeps of one community, removed in one
-- transaction, for an association that leaves a portfolio. One row per kind with the rows it
-- removed: documents and chunks (with them their BM25 postings and words, through the chunks'
-- triggers), the keeper's confirmations, the chat's votes, the query log's questions, the status
-- calibrations and language scales; and its vector table, HNSW index and vector-leg function when
-- it had them (arc_community_vector_index), counted as objects.
--
-- Kept: the community's version row (knowledge_base_state) and its zeroed statistics row
-- (bm25_corpus). Its version only moves up, so a community loaded again under the same name never
-- meets a cached search or a stored calibration of the one deleted. Neither names anything of it.
--
-- The community's vector lock (exclusive) makes it wait for loads and builds of the community under
-- way and them for it. A name nothing is kept under is an error (22023) naming the community.
create or replace function arc_delete_community(community text)
returns table (kind text, removed bigint)
language plpgsql
set search_path = public, extensions
as $$
declare
  c text := arc_delete_community.community;
  objects bigint := 0;
  documents bigint;
  chunks bigint;
  scales bigint;
begin
  if c is null
     or not (exists (select 1 from knowledge_chunks k where k.community = c)
             or exists (select 1 from answer_confirmations a where a.community = c)
             or exists (select 1 from answer_feedback f where f.community = c)
             or exists (select 1 from query_log q where q.community = c)
             or exists (select 1 from status_calibrations s where s.community = c)
             or to_regclass(quote_ident(arc_community_vector_table_name(c))) is not null) then
    raise exception 'community %: nothing is kept under that name', coalesce(c, 'null') using errcode = '22023';
  end if;
  perform arc_community_vectors_lock(c, true);

  -- its own objects first, so the chunks' delete below copies nothing into a table about to go
  if to_regprocedure(format('%I(vector, text[], boolean, boolean, integer)', arc_community_vector_leg_name(c)))
     is not null then
    execute format('drop function %I(vector, text[], boolean, boolean, integer)', arc_community_vector_leg_name(c));
    objects := objects + 1;
  end if;
  if to_regclass(quote_ident(arc_community_vector_index_name(c))) is not null then
    objects := objects + 1;  -- the index goes with its table (or, made before 096, on its own)
    execute format('drop index %I', arc_community_vector_index_name(c));
  end if;
  if to_regclass(quote_ident(arc_community_vector_table_name(c))) is not null then
    execute format('drop table %I', arc_community_vector_table_name(c));
    objects := objects + 1;
  end if;
  if to_regclass(quote_ident(arc_community_object_name('knowledge_chunks_hnsw_', c))) is not null then
    execute format('drop index %I', arc_community_object_name('knowledge_chunks_hnsw_', c));
    objects := objects + 1;
  end if;

  select count(distinct k.document_id), count(*) into documents, chunks
    from knowledge_chunks k where k.community = c;
  delete from knowledge_chunks k where k.community = c;
  kind := 'documents'; removed := documents; return next;
  kind := 'chunks'; removed := chunks; return next;

  delete from answer_confirmations a where a.community = c;
  get diagnostics removed = row_count;
  kind := 'confirmations'; return next;
  delete from answer_feedback f where f.community = c;
  get diagnostics removed = row_count;
  kind := 'votes'; return next;
  delete from query_log q where q.community = c;
  get diagnostics removed = row_count;
  kind := 'questions asked'; return next;
  delete from status_calibrations s where s.community = c;
  get diagnostics removed = row_count;
  delete from status_language_scales s where s.community = c;
  get diagnostics scales = row_count;
  kind := 'calibrations'; removed := removed + scales; return next;
  kind := 'objects'; removed := objects; return next;
end
$$;

select arc_service_role_only('function', 'arc_delete_community(text)');
