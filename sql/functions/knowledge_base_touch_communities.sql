-- Statement triggers (knowledge_chunks_version_*, 030, named after the BM25 triggers so they fire
-- after them: corpus rows, words, then versions): move the changed communities' versions.
-- One function for the three row-carrying events (each trigger has its own transition tables).
create or replace function knowledge_base_touch_communities() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  if current_setting('arc.bm25_refreshing', true) = 'on' then
    return null;  -- a refresh step already moved its community's version, before taking rows
  end if;
  if tg_op = 'INSERT' then
    perform knowledge_base_bump(array(select distinct community from new_rows order by 1));
  elsif tg_op = 'DELETE' then
    perform knowledge_base_bump(array(select distinct community from old_rows order by 1));
  elsif tg_op = 'UPDATE' then
    perform knowledge_base_bump(array(select community from old_rows union select community from new_rows
                                      order by 1));
  else  -- TRUNCATE: every community
    perform knowledge_base_bump(array(select community from knowledge_base_state order by 1));
  end if;
  return null;
end
$$;

select arc_service_role_only('function', 'knowledge_base_touch_communities()');
