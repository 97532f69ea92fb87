-- A chunk moved to another community takes its postings along (012 looked at the text only).
create or replace function bm25_postings_on_update() returns trigger
language plpgsql
set search_path = public, extensions
as $$
declare
  changed bigint[];
begin
  if current_setting('arc.bm25_refreshing', true) = 'on' then
    return null;
  end if;
  select array_agg(n.id) into changed
    from old_rows o join new_rows n on n.id = o.id
   where o.fts is distinct from n.fts or o.community <> n.community;
  if changed is not null then
    perform bm25_postings_remove(changed);
    perform bm25_postings_add(changed);
  end if;
  return null;
end
$$;

select arc_service_role_only('function', 'bm25_postings_on_update()');
