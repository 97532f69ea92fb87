-- 035: the keeper's signed-in sessions on the pages (worker/serve/keeper_sessions.py).
--
-- The session cookie is signed, and a signature alone cannot be taken back: a cookie copied
-- before sign-out would open the pages until the admin token changed. So a sign-in also writes
-- a row here, under the hash of a random id the cookie carries (never the id itself); every page
-- asks for it, sign-out deletes it, and a row unused for ARC_SESSION_IDLE_MINUTES no longer
-- opens anything. Every worker process, and every machine on one database, sees the same rows.
create table if not exists keeper_sessions (
  session_hash  text primary key,
  created_at    timestamptz not null default now(),
  last_seen     timestamptz not null default now()
);
create index if not exists keeper_sessions_last_seen on keeper_sessions (last_seen);

select arc_service_role_only('table', 'keeper_sessions');
