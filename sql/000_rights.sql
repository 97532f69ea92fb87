-- 000: how every table and function of this project is shared on Supabase: with the service
-- role only (the worker's key). anon and authenticated (the browser's keys) get nothing, and
-- PUBLIC loses what Postgres gives it by default (EXECUTE on every new function). Roles that do
-- not exist (plain Postgres) are skipped. 009 applies it to the objects before it; later files
-- call it for their own. It runs with its caller's rights, so it grants nothing the caller lacks.
-- arc: repeatable (function definitions and their rights: applied again whenever this file changes)
create or replace function arc_service_role_only(object_kind text, object_name text)
returns void
language plpgsql
set search_path = public, extensions
as $$
declare
  r text;
begin
  if object_kind not in ('table', 'function') then
    raise exception 'object_kind must be table or function' using errcode = '22023';
  end if;
  execute format('revoke all on %s %s from public', object_kind, object_name);
  foreach r in array array['anon', 'authenticated'] loop
    if exists (select 1 from pg_roles where rolname = r) then
      execute format('revoke all on %s %s from %I', object_kind, object_name, r);
    end if;
  end loop;
  if exists (select 1 from pg_roles where rolname = 'service_role') then
    execute format('grant %s on %s %s to service_role',
                   case object_kind when 'table' then 'select, insert, update, delete' else 'execute' end,
                   object_kind, object_name);
  end if;
end
$$;

select arc_service_role_only('function', 'arc_service_role_only(text, text)');
