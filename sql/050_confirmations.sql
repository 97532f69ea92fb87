-- 050: the keeper's confirmed answers, and the votes the chat gives answers.
--
-- A confirmation says "this passage answers this question" (answer = 'passage') or "the
-- documents do not address it" (answer = 'none'). It names its passage by what does not move
-- when a document is ingested again: the document, the passage's text (md5) and where it stood
-- (chunk_index, a tie-breaker). arc_confirmations resolves that to today's chunk, or says why the
-- confirmation is stale (the passage changed or went, the document was deleted or superseded,
-- an amendment replaces its section): validity is computed from the current data, never kept.
-- The question's embedding is kept (the matcher compares later questions with it); a change of
-- embedding model makes it unreadable, so embedding_model names the model that made it.

create table if not exists answer_confirmations (
  id               bigint generated always as identity primary key,
  community        text not null,
  query            text not null,
  answer           text not null check (answer in ('passage', 'none')),
  document_id      text,
  chunk_index      integer,
  section_path     text,
  content_md5      text,
  embedding        real[] not null,
  embedding_model  text not null,
  created_at       timestamptz not null default now(),
  constraint answer_confirmations_passage check ((answer = 'passage') = (document_id is not null and content_md5 is not null))
);
-- One confirmation per question and community: confirming it again replaces the answer.
create unique index if not exists answer_confirmations_question on answer_confirmations (community, lower(query));
-- Resolving a confirmation to today's chunk: the chunks of its document whose text has that md5.
create index if not exists knowledge_chunks_content_md5 on knowledge_chunks (community, document_id, md5(content));

-- A vote from the chat on an answer the worker gave (its request id, as the query log has it):
-- kept beside the query log, never a confirmation by itself.
create table if not exists answer_feedback (
  id          bigint generated always as identity primary key,
  request_id  text not null,
  community   text,
  helpful     boolean not null,
  source      integer,
  created_at  timestamptz not null default now()
);
create index if not exists answer_feedback_request on answer_feedback (request_id);
create index if not exists query_log_request_id on query_log (request_id);

alter table answer_confirmations enable row level security;
alter table answer_feedback enable row level security;
select arc_service_role_only('table', 'answer_confirmations');
select arc_service_role_only('table', 'answer_feedback');
select arc_service_role_only('sequence', 'answer_confirmations_id_seq');
select arc_service_role_only('sequence', 'answer_feedback_id_seq');
