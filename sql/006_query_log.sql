-- 006: one row per answered retrieval request, written by the worker after it responds.
-- No document text is stored here, only the question and numbers.
create table if not exists query_log (
  id                  bigint generated always as identity primary key,
  created_at          timestamptz not null default now(),
  request_id          text,
  query               text not null,
  normalized_query    text,
  query_type          text,
  status              text not null,
  best_score          double precision,
  result_count        integer not null default 0,
  candidate_count     integer not null default 0,
  both_legs_count     integer not null default 0,
  vector_only_count   integer not null default 0,
  fts_only_count      integer not null default 0,
  avg_vector_score    double precision,
  avg_fts_score       double precision,
  reranked            boolean not null default false,
  warnings            text[] not null default '{}',
  timings_ms          jsonb not null default '{}'::jsonb
);
create index if not exists query_log_created_at on query_log (created_at);
