-- 008: a counter that moves with every change to knowledge_chunks, whoever makes it (a worker,
-- the CLI, another instance, SQL by hand). A worker serves a cached search only while the counter
-- is where it was when the search ran, so a replaced or deleted chunk is never served from memory.
create table if not exists knowledge_base_state (
  id          boolean primary key default true check (id),
  version     bigint not null default 0,
  changed_at  timestamptz not null default now()
);
-- (030 keys this table by community instead: pasted again after it, there is nothing to add)
do $$
begin
  if exists (select 1 from information_schema.columns where table_schema = current_schema()
              and table_name = 'knowledge_base_state' and column_name = 'id') then
    insert into knowledge_base_state (id) values (true) on conflict (id) do nothing;
  end if;
end
$$;

-- A statement trigger: one row update per statement, after the BM25 triggers (triggers fire in
-- name order), so every writer takes bm25_corpus, then this row: one lock order, no deadlocks.
create or replace function knowledge_base_touch() returns trigger
language plpgsql
as $$
begin
  update knowledge_base_state set version = version + 1, changed_at = now() where id;
  return null;
end
$$;

drop trigger if exists knowledge_chunks_version on knowledge_chunks;
create trigger knowledge_chunks_version
  after insert or update or delete or truncate on knowledge_chunks
  for each statement execute function knowledge_base_touch();

create or replace function knowledge_base_version() returns bigint
language sql stable
as $$
  select version from knowledge_base_state where id
$$;
