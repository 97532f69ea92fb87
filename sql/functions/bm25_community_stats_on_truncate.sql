-- Statement trigger (knowledge_chunks_bm25_truncate, 030): every community's statistics to zero.
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

select arc_service_role_only('function', 'bm25_community_stats_on_truncate()');
