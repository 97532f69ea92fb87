-- w(t, d) of 003 for one lexeme (the same arithmetic as bm25_document_vector).
create or replace function bm25_term_weight(tf integer, dl integer, avgdl double precision,
                                            k1 double precision, b double precision)
returns real
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select (tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / greatest(coalesce(avgdl, dl), 1))))::real
$$;

select arc_service_role_only('function',
  'bm25_term_weight(integer, integer, double precision, double precision, double precision)');
