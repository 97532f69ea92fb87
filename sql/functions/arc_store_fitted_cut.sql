-- Store the success cut a community's confirmed questions fitted on its calibration at kb_version
-- (092), or clear it (success_at null: too few confirmations). A calibration of another version
-- is left alone: the fit was read on a scale that is no longer the stored one.
create or replace function arc_store_fitted_cut(community text, embedding_model text, kb_version bigint,
                                                success_at double precision, answerable integer,
                                                unanswerable integer, loo_accuracy double precision,
                                                configured_accuracy double precision,
                                                configured_at double precision, gained integer,
                                                lost integer)
returns boolean
language sql
set search_path = public, extensions
as $$
  with stored as (
    update status_calibrations s
       set fitted_success_at = arc_store_fitted_cut.success_at,
           fitted_answerable = arc_store_fitted_cut.answerable,
           fitted_none = arc_store_fitted_cut.unanswerable,
           fitted_loo_accuracy = arc_store_fitted_cut.loo_accuracy,
           fitted_configured_accuracy = arc_store_fitted_cut.configured_accuracy,
           fitted_configured_at = arc_store_fitted_cut.configured_at,
           fitted_gained = arc_store_fitted_cut.gained,
           fitted_lost = arc_store_fitted_cut.lost
     where s.community = arc_store_fitted_cut.community
       and s.embedding_model = arc_store_fitted_cut.embedding_model
       and s.kb_version = arc_store_fitted_cut.kb_version
    returning 1
  )
  select exists (select 1 from stored)
$$;

select arc_service_role_only('function', 'arc_store_fitted_cut(text, text, bigint, double precision, integer, integer, double precision, double precision, double precision, integer, integer)');
