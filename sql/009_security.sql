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
--     pgvector types are found in public (plain Postgres) or extensions (Supabase).
-- Roles that do not exist (plain Postgres) are skipped. Applied again by hand it changes nothing.

-- A function with its own search_path is never inlined, and bm25_document_vector (run for every
-- chunk written) called bm25_lexeme_index once per lexeme: with both pinned, writing BM25
-- weights took 1.9x as long. The hash is written out here instead (the same expression as
-- bm25_lexeme_index, which queries still use once per question word), so the pinned
-- search_path costs one setting per chunk, not one per lexeme.
create or replace function bm25_document_vector(doc tsvector, avgdl double precision,
                                                k1 double precision, b double precision)
returns sparsevec
language sql immutable parallel safe
set search_path = public, extensions
as $$
  with terms as (
    select (('x' || substr(md5(t.lexeme), 1, 8))::bit(32)::bigint % 999999999)::integer + 1 as i,
           coalesce(array_length(t.positions, 1), 1) as tf
    from unnest(doc) as t
  ), len as (
    select coalesce(sum(tf), 0) as dl from terms
  ), grouped as (
    select i, sum(tf)::double precision as tf from terms group by i
  )
  select coalesce(
    (select ('{' || string_agg(g.i || ':' ||
                 (g.tf * (k1 + 1) / (g.tf + k1 * (1 - b + b * len.dl / greatest(coalesce(avgdl, len.dl), 1)))),
               ',' order by g.i) || '}/999999999')::sparsevec
     from grouped g, len),
    '{}/999999999'::sparsevec)
$$;

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
  f regprocedure;
begin
  for r in select unnest(array['anon', 'authenticated']) loop
    if exists (select 1 from pg_roles where rolname = r) then
      execute format('revoke all on all sequences in schema public from %I', r);
      execute format('revoke select on retrieval_source_mix from %I', r);
    end if;
  end loop;

  for f in
    select p.oid::regprocedure
    from pg_proc p
    where p.pronamespace = 'public'::regnamespace
      and p.proname in ('hybrid_search', 'chunk_neighbours', 'knowledge_base_version', 'knowledge_base_touch',
                        'arc_fts_document', 'bm25_lexeme_index', 'bm25_document_vector', 'bm25_document_length',
                        'bm25_chunk_weights', 'bm25_stats_add', 'bm25_stats_on_insert', 'bm25_stats_on_delete',
                        'bm25_stats_on_update', 'bm25_stats_on_truncate', 'bm25_refresh', 'bm25_seed_avgdl',
                        'bm25_query_terms')
  loop
    execute format('alter function %s set search_path = public, extensions', f);
    perform arc_service_role_only('function', f::text);
  end loop;
end
$$;
