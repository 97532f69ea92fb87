-- 042: a rerank service's score scale, stored with the status calibration.
--
-- With a rerank service (RERANKER=cohere|jina|voyage|tei|infinity) the service's best score sets
-- the status, and a cross-encoder's score sits on its own scale as a cosine similarity does. So
-- the calibration also asks the service the same off-domain questions and own sentences over
-- their first-stage candidates (worker/retrieve/calibration.py) and keeps the floor, match and
-- near miss of its score here. Such a row is stored under the embedding model and the service's
-- identity (service, model, score reading, address: worker/retrieve/rerank_services.py), so
-- another service or model is another calibration. rerank_failure says why the service's scale
-- could not be measured (the service failed meanwhile): the row's first-stage scale stands, the
-- service's status reads the fixed cuts, and the measurement is tried again later (a claim on a
-- row with rerank_failure succeeds at the same version: sql/functions/arc_claim_status_calibration.sql).
alter table status_calibrations add column if not exists rerank_floor double precision;
alter table status_calibrations add column if not exists rerank_match double precision;
alter table status_calibrations add column if not exists rerank_near_miss double precision;
alter table status_calibrations add column if not exists rerank_failure text;
