-- 090: the date a document took effect. Each chunk's metadata carries its document's
-- "effective_date" (YYYY-MM-DD, written at ingest; absent: undated, in force from the beginning),
-- so that hybrid_search and chunk_neighbours hand it to the answer without another read, and
-- arc_in_force reads it to answer as of a date (docs/as-of.md). This check keeps a value that
-- arc_in_force could not read as a date (a row written by hand, say) out of the table.
do $$
begin
  if not exists (select 1 from pg_constraint where conname = 'knowledge_chunks_effective_date') then
    alter table knowledge_chunks add constraint knowledge_chunks_effective_date
      check (not metadata ? 'effective_date' or metadata ->> 'effective_date' ~ '^\d{4}-\d{2}-\d{2}$');
  end if;
end
$$;
