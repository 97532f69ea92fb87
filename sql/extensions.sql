-- The extensions, applied first of all (the functions' signatures and the tables use their types),
-- and again whenever this file changes. pgvector gives the vector and sparsevec types and HNSW.
-- Supabase keeps extensions in schema `extensions` (Database > Extensions enables "vector" there;
-- its Security Advisor flags an extension in public), so this file puts it there when that schema
-- exists, and in the default schema on plain Postgres. Nothing is done when it is enabled already.
do $$
begin
  if exists (select 1 from pg_namespace where nspname = 'extensions') then
    create extension if not exists vector with schema extensions;
  else
    create extension if not exists vector;
  end if;
end
$$;
