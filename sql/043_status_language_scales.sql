-- 043: the status scales of questions in other languages, stored beside the status calibration.
--
-- With an embedding model that reads other languages, a question in Spanish about English
-- documents scores lower than the same question in English (the cross-language cosine sits lower,
-- and the English full-text leg finds nothing to add), so the English calibration (036) would call
-- it unrelated. The calibration therefore also measures, per language it ships questions for
-- (worker/assets/*.LANG.txt), that language's own scale on the vector leg: its floor (the
-- off-domain questions asked in that language), and the English match and near miss less the
-- model's drop on the same homeowner questions asked in both languages
-- (worker/retrieve/language_scale.py). One row per community, embedding model and language, at
-- the knowledge base version it was measured on (the calibration's own): a row of another version
-- is stale and not read.
create table if not exists status_language_scales (
  community        text not null,
  embedding_model  text not null,
  language         text not null,            -- ISO 639-1
  kb_version       bigint not null,
  floor            double precision not null,
  match            double precision not null,
  near_miss        double precision not null,
  language_drop    double precision not null, -- the median cosine drop from English to this language
  pairs            integer not null,          -- the homeowner questions asked in both languages
  measured_at      timestamptz not null default now(),
  primary key (community, embedding_model, language)
);

select arc_service_role_only('table', 'status_language_scales');
