-- 040: which embedding model made the vectors in knowledge_chunks.embedding.
--
-- Two models of one size (all-MiniLM-L6-v2 and multilingual-e5-small both make 384 numbers) fit
-- the same column, but their vectors mean nothing to each other: a question embedded by one
-- finds noise among passages embedded by the other. The worker records the model that wrote the
-- chunks here, refuses to start or to ingest with another one while chunks exist
-- (worker/store/model_record.py), and `arc-retrieval reembed` embeds every chunk again with the
-- configured model and records it. One row: the column holds one model's vectors.
create table if not exists knowledge_base_model (
  id           boolean primary key default true check (id),
  model        text not null,
  dim          integer not null,
  recorded_at  timestamptz not null default now()
);

alter table knowledge_base_model enable row level security;
select arc_service_role_only('table', 'knowledge_base_model');
