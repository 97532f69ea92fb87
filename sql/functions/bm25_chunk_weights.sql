-- Row trigger (knowledge_chunks_bm25_weights, 030): a chunk's stored BM25 weights, its length and
-- its generation, computed with its community's avgdl, k1 and b whenever its text or community
-- is written. A community's first chunk makes that community's bm25_corpus row.
create or replace function bm25_chunk_weights() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  doc tsvector := arc_fts_document(new.section_path, new.content);
  corpus bm25_corpus;
begin
  select * into corpus from bm25_corpus where community = new.community;
  if not found then  -- a community's first chunk: its row, with the default k1 and b
    insert into bm25_corpus (community) values (new.community) on conflict (community) do nothing;
    select * into corpus from bm25_corpus where community = new.community;
  end if;
  new.fts_length := bm25_document_length(doc);
  new.bm25 := bm25_document_vector(doc, corpus.avgdl_indexed, corpus.k1, corpus.b);
  new.bm25_generation := corpus.generation;
  return new;
end
$$;

select arc_service_role_only('function', 'bm25_chunk_weights()');
