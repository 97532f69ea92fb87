-- The text the full-text leg indexes: the section hierarchy then the content, so a heading
-- ("Fencing") finds the chunks under it, with accents folded (arc_fold_accents) as the question's
-- lexemes are. One function, used by the generated column and by the BM25 trigger, so the two can
-- never disagree.
create or replace function arc_fts_document(section_path text, content text)
returns tsvector
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select to_tsvector('english'::regconfig,
                     arc_fold_accents(coalesce(section_path, '') || ' ' || coalesce(content, '')))
$$;

select arc_service_role_only('function', 'arc_fts_document(text, text)');
