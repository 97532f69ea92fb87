-- Claim the measurement of a community at a version: true when this caller is to measure it
-- (no calibration at that version is stored, or one whose rerank service's scale failed to be
-- measured (042), and no live claim for it or a later one).
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
     and (s.kb_version is distinct from arc_claim_status_calibration.kb_version or s.rerank_failure is not null)
     and (s.claimed_at is null
          or s.claimed_at < now() - make_interval(secs => lease_seconds)
          or s.claimed_version < arc_claim_status_calibration.kb_version);
  get diagnostics claimed = row_count;
  return claimed > 0;
end
$$;

select arc_service_role_only('function', 'arc_claim_status_calibration(text, text, bigint, double precision)');
