-- Before a community's first load, take its avgdl from the documents about to be loaded.
-- Before communities: (sections, contents).
drop function if exists bm25_seed_avgdl(text[], text[]);
create or replace function bm25_seed_avgdl(sections text[], contents text[], community_name text)
returns void
language sql
set search_path = public, extensions
as $$
  insert into bm25_corpus (community, avgdl_indexed)
  select community_name, avg(bm25_document_length(arc_fts_document(s, c)))
    from unnest(sections, contents) as t(s, c)
  on conflict (community) do update set avgdl_indexed = excluded.avgdl_indexed
   where bm25_corpus.n_docs = 0;
$$;

select arc_service_role_only('function', 'bm25_seed_avgdl(text[], text[], text)');
