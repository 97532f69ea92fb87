-- 011: what a document declares about others. The first chunk of a document that supersedes or
-- amends another records it in metadata ("supersedes", "amends"), and ingesting any document
-- looks those records up (superseding_document, amendments_of in queries.sql) so the marks are
-- applied whichever of the two arrives first. Without these partial indexes each lookup read
-- every chunk of the knowledge base, once per document ingested; they hold only those first
-- chunks, so they cost next to nothing.
create index if not exists knowledge_chunks_supersedes
  on knowledge_chunks ((metadata ->> 'supersedes'))
  where chunk_index = 0 and metadata ? 'supersedes';
create index if not exists knowledge_chunks_amends
  on knowledge_chunks using gin ((metadata -> 'amends') jsonb_path_ops)
  where chunk_index = 0 and metadata ? 'amends';
