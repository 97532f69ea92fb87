-- How every table, view, sequence and function of this project is shared on Supabase:
-- with the service role only (the worker's key). anon and authenticated (the browser's keys) get
-- nothing, and PUBLIC loses what Postgres gives it by default (EXECUTE on every new function).
-- Roles that do not exist (plain Postgres) are skipped. The numbered migrations call it for
-- their tables, views and sequences, and every file of sql/functions/ for its functions. It
-- runs with its caller's rights, so it grants nothing the caller lacks.
create or replace function arc_service_role_only(object_kind text, object_name text)
returns void
language plpgsql
set search_path = public, extensions
as $$
declare
  r text;
  grammar text;
begin
  if object_kind not in ('table', 'view', 'sequence', 'function') then
    raise exception 'object_kind must be table, view, sequence or function' using errcode = '22023';
  end if;
  -- GRANT and REVOKE name a view as a table; a view gets everything a table does (INSERT,
  -- TRUNCATE, TRIGGER: LOCK TABLE needs only one of them), so it is revoked the same way.
  grammar := case object_kind when 'view' then 'table' else object_kind end;
  execute format('revoke all on %s %s from public', grammar, object_name);
  foreach r in array array['anon', 'authenticated'] loop
    if exists (select 1 from pg_roles where rolname = r) then
      execute format('revoke all on %s %s from %I', grammar, object_name, r);
    end if;
  end loop;
  if exists (select 1 from pg_roles where rolname = 'service_role') then
    execute format('grant %s on %s %s to service_role',
                   case object_kind when 'table' then 'select, insert, update, delete'
                                    when 'view' then 'select'
                                    when 'sequence' then 'usage, select'
                                    else 'execute' end,
                   grammar, object_name);
  end if;
end
$$;

select arc_service_role_only('function', 'arc_service_role_only(text, text)');
