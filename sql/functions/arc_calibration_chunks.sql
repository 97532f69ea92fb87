-- The chunks a status calibration asks back, as a function PostgREST can serve.
--
-- The worker calibrates its status on each knowledge base (worker/retrieve/confidence.py): it
-- asks a fixed sample of the knowledge base's own sentences back, by the path a question takes.
-- A worker on Supabase reads only through RPC functions, so without this one it had no sample
-- and kept the fixed thresholds that do not carry from one document set to another.
-- The sample is chosen by what a chunk is (document and position), not by its id, so a
-- community gets the same sample, and the same calibration, in a database of its own as beside
-- others whose chunks take ids in between. Superseded chunks are never asked back.
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
