-- 009: who may touch the knowledge base. On Supabase every table in schema public is exposed
-- through PostgREST, and Supabase's default privileges grant the anon role (whose key ships in
-- browsers) everything on new tables and functions: before this, `anon` could read every chunk
-- and every user question in query_log, and delete the knowledge base.
--
--   * Row level security on every table this SQL creates, with no policy: a role without
--     BYPASSRLS (anon, authenticated) sees and changes no row. The owner (the role that loaded
--     this SQL, e.g. postgres) and service_role (BYPASSRLS on Supabase) are not affected.
--   * Privileges taken back from PUBLIC, anon and authenticated (RLS does not cover TRUNCATE,
--     and a revoked table fails loudly instead of answering an empty list).
--   * The functions keep invoker rights: hybrid_search and chunk_neighbours read nothing their
--     caller may not read itself, so a mistake in a grant cannot expose more than that role
--     already has (a security definer function would run as the owner, past RLS). EXECUTE is
--     revoked from PUBLIC, anon and authenticated and granted to service_role: the worker calls
--     them with the service role key (SUPABASE_KEY), never with the anon key.
--   * Every function gets a fixed search_path (Supabase's advisor flags mutable ones); the
--     pgvector types are found in public (plain Postgres) or extensions (Supabase). Both that
--     and the functions' rights are written in each file of sql/functions/.
-- Roles that do not exist (plain Postgres) are skipped. Applied again by hand it changes nothing.

alter table knowledge_chunks enable row level security;
alter table bm25_corpus enable row level security;
alter table bm25_terms enable row level security;
alter table query_log enable row level security;
alter table knowledge_base_state enable row level security;
alter table schema_migrations enable row level security;

select arc_service_role_only('table', t)
  from unnest(array['knowledge_chunks', 'bm25_corpus', 'bm25_terms', 'query_log', 'knowledge_base_state',
                    'schema_migrations']) t;

do $$
declare
  r text;
begin
  for r in select unnest(array['anon', 'authenticated']) loop
    if exists (select 1 from pg_roles where rolname = r) then
      execute format('revoke all on all sequences in schema public from %I', r);
      execute format('revoke select on retrieval_source_mix from %I', r);
    end if;
  end loop;
end
$$;
