-- 008: a counter that moves with every change to knowledge_chunks, whoever makes it (a worker,
-- the CLI, another instance, SQL by hand). A worker serves a cached search only while the counter
-- is where it was when the search ran, so a replaced or deleted chunk is never served from memory.
-- Statement triggers move it (030 keys it by community; sql/functions/knowledge_base_bump.sql).
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
