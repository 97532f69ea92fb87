-- 092: the success cut a community's confirmed questions fit, stored with its status calibration,
-- and the documents a "not in the documents" confirmation was made against.
--
-- Once a community has enough confirmed questions (worker/retrieve/fitted_cut.py), each is asked
-- again as if unconfirmed and the success cut that puts the most of them on their side is fitted.
-- It belongs to the calibration it was read on (the same row: a new measurement clears it until it
-- is fitted again) and is read with it, so every process and replica decides on the same cut. The
-- row keeps what the fit rests on (how many answerable and "none" confirmations), its
-- leave-one-out accuracy, the configured cut's accuracy on the same questions, and how many questions
-- the fitted cut, left out, puts right that the configured cut does not (gained) and the reverse
-- (lost): it decides only when the gain is clear (worker/retrieve/fitted_cut.py).
alter table status_calibrations add column if not exists fitted_success_at double precision;
alter table status_calibrations add column if not exists fitted_answerable integer;
alter table status_calibrations add column if not exists fitted_none integer;
alter table status_calibrations add column if not exists fitted_loo_accuracy double precision;
alter table status_calibrations add column if not exists fitted_configured_accuracy double precision;
alter table status_calibrations add column if not exists fitted_configured_at double precision;
alter table status_calibrations add column if not exists fitted_gained integer;
alter table status_calibrations add column if not exists fitted_lost integer;

-- A "none" confirmation says the documents did not address a question: a document the community
-- gains afterwards may, so the confirmation goes stale then (arc_confirmations). The documents it
-- was made against are kept; one made before this column existed counts the documents of today.
alter table answer_confirmations add column if not exists documents_then text[];
update answer_confirmations c
   set documents_then = coalesce((select array_agg(distinct k.document_id order by k.document_id)
                                    from knowledge_chunks k where k.community = c.community), '{}')
 where c.answer = 'none' and c.documents_then is null;
