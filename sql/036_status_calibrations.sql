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
-- processes finding the same stale row measure it once (the functions in
-- sql/functions/arc_*status_calibration*.sql): the others wait for the row or keep the
-- previous calibration. A claim lapses after its lease, so a worker that died mid-measurement
-- blocks nobody for long.

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
