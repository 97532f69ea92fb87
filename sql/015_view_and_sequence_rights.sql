-- 015: the monitoring view and the identity sequences belong to the service role only, like
-- every table and function. Supabase's default privileges grant anon and authenticated
-- everything on a new view and sequence; 009 took back only SELECT on retrieval_source_mix, so
-- anon kept INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES and TRIGGER on it, and any one of them
-- lets `LOCK TABLE retrieval_source_mix IN ACCESS EXCLUSIVE MODE` lock query_log beneath it,
-- stalling the worker's log writes. 009 revoked the sequences from anon and authenticated but
-- not from PUBLIC. Applied again it changes nothing.
select arc_service_role_only('view', 'retrieval_source_mix');
select arc_service_role_only('sequence', s)
  from unnest(array[pg_get_serial_sequence('knowledge_chunks', 'id'), pg_get_serial_sequence('query_log', 'id')]) s;
