-- Whether a chunk was in force on a date (worker/retrieve/in_force.py, docs/as-of.md): its document
-- had taken effect (metadata effective_date on or before as_of), the document superseding it, if
-- any, had not yet, and neither had the document that amended its section, if any. A document
-- without an effective_date counts as in force from the beginning: undated, it has always taken
-- effect, and an undated replacement has always replaced what it replaces. A replacement no longer
-- stored replaces nothing. hybrid_search applies it to both legs when it is given filter_as_of.
-- Each look-up of a replacing document reads its first chunk through the unique
-- (community, document_id, chunk_index) index.
create or replace function arc_in_force(chunk_id bigint, as_of date)
returns boolean
language sql stable
set search_path = public, extensions
as $$
  select coalesce((c.metadata ->> 'effective_date')::date <= as_of, true)
     and not exists (
           select 1 from knowledge_chunks r
            where r.community = c.community and r.chunk_index = 0
              and r.document_id in (c.superseded_by, c.metadata ->> 'amended_by')
              and coalesce((r.metadata ->> 'effective_date')::date <= as_of, true))
  from knowledge_chunks c
  where c.id = chunk_id
$$;

select arc_service_role_only('function', 'arc_in_force(bigint, date)');
