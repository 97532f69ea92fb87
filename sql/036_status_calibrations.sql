-- 036: the status calibration, stored with the knowledge base it was measured on.
--
-- The status reads a question's best relevance against the knowledge base's own scale (floor,
-- match, near miss: worker/retrieve/confidence.py). Measuring that scale asks some 160 questions,
-- so it is measured once per change of a community's documents, for one embedding model, and
-- kept here: every process, replica host, the MCP server and the CLI read it instead of measuring
-- it again. A row whose kb_version is not the community's knowledge_base_version is stale; a row
-- with kb_version null holds only a claim (nothing measured yet). A calibration that found the
-- knowledge base too small to measure is stored too (too_small), so that nobody measures it again
-- until its documents change.
--
-- A worker claims a measurement before making it (arc_claim_status_calibration), so that many
-- processes finding the same stale row measure it once: the others wait for the row or keep the
-- previous calibration. A claim lapses after its lease, so a worker that died mid-measurement
-- blocks nobody for long.
-- arc: repeatable (a table made if missing, function definitions and their rights)

create table if not exists status_calibrations (
  community        text not null,
  embedding_model  text not null,
  kb_version       bigint,              -- the community's version measured; null: not measured yet
  floor            double precision,
  match            double precision,
  near_miss        double precision,
  questions        integer not null default 0,
  too_small        boolean not null default false,
  measured_ms      integer,
  measured_at      timestamptz,
  claimed_at       timestamptz,
  claimed_version  bigint,
  primary key (community, embedding_model)
);

select arc_service_role_only('table', 'status_calibrations');

-- The stored calibration and the community's current version, in one row (the calibration's
-- columns null when none is stored).
create or replace function arc_status_calibration(community text, embedding_model text)
returns table (kb_version bigint, floor double precision, match double precision, near_miss double precision,
               questions integer, too_small boolean, measured_at timestamptz, current_version bigint)
language sql stable
set search_path = public, extensions
as $$
  select s.kb_version, s.floor, s.match, s.near_miss, coalesce(s.questions, 0), coalesce(s.too_small, false),
         s.measured_at, knowledge_base_version(arc_status_calibration.community)
  from (select 1) one
  left join status_calibrations s
    on s.community = arc_status_calibration.community
   and s.embedding_model = arc_status_calibration.embedding_model
   and s.kb_version is not null
$$;

-- The communities holding chunks whose calibration for this model is missing or stale.
create or replace function arc_stale_status_calibrations(embedding_model text)
returns table (community text, current_version bigint, kb_version bigint)
language sql stable
set search_path = public, extensions
as $$
  select k.community, coalesce(k.version, 0), s.kb_version
  from knowledge_communities k
  left join status_calibrations s
    on s.community = k.community and s.embedding_model = arc_stale_status_calibrations.embedding_model
  where s.kb_version is distinct from coalesce(k.version, 0)
  order by k.community
$$;

-- Claim the measurement of a community at a version: true when this caller is to measure it
-- (no calibration at that version is stored, and no live claim for it or a later one).
create or replace function arc_claim_status_calibration(community text, embedding_model text,
                                                        kb_version bigint,
                                                        lease_seconds double precision default 120)
returns boolean
language plpgsql
set search_path = public, extensions
as $$
declare
  claimed integer;
begin
  insert into status_calibrations as s (community, embedding_model)
  values (arc_claim_status_calibration.community, arc_claim_status_calibration.embedding_model)
  on conflict do nothing;
  update status_calibrations s
     set claimed_at = now(), claimed_version = arc_claim_status_calibration.kb_version
   where s.community = arc_claim_status_calibration.community
     and s.embedding_model = arc_claim_status_calibration.embedding_model
     and s.kb_version is distinct from arc_claim_status_calibration.kb_version
     and (s.claimed_at is null
          or s.claimed_at < now() - make_interval(secs => lease_seconds)
          or s.claimed_version < arc_claim_status_calibration.kb_version);
  get diagnostics claimed = row_count;
  return claimed > 0;
end
$$;

-- Store a measurement; an older version never replaces a newer one. Releases the claim.
create or replace function arc_store_status_calibration(community text, embedding_model text,
                                                        kb_version bigint, floor double precision,
                                                        match double precision, near_miss double precision,
                                                        questions integer,
                                                        too_small boolean, measured_ms integer)
returns void
language sql
set search_path = public, extensions
as $$
  insert into status_calibrations as s (community, embedding_model, kb_version, floor, match, near_miss,
                                        questions, too_small, measured_ms, measured_at)
  values (arc_store_status_calibration.community, arc_store_status_calibration.embedding_model,
          arc_store_status_calibration.kb_version, arc_store_status_calibration.floor,
          arc_store_status_calibration.match, arc_store_status_calibration.near_miss,
          arc_store_status_calibration.questions, arc_store_status_calibration.too_small,
          arc_store_status_calibration.measured_ms, now())
  on conflict (community, embedding_model) do update
     set kb_version = excluded.kb_version, floor = excluded.floor, match = excluded.match,
         near_miss = excluded.near_miss, questions = excluded.questions, too_small = excluded.too_small,
         measured_ms = excluded.measured_ms, measured_at = excluded.measured_at,
         claimed_at = null, claimed_version = null
   where s.kb_version is null or s.kb_version <= excluded.kb_version
$$;

select arc_service_role_only('function', f)
  from unnest(array['arc_status_calibration(text, text)', 'arc_stale_status_calibrations(text)',
                    'arc_claim_status_calibration(text, text, bigint, double precision)',
                    'arc_store_status_calibration(text, text, bigint, double precision, double precision, '
                    'double precision, integer, boolean, integer)']) f;
