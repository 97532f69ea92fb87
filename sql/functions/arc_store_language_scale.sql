-- Store one language's scale (043); an older version never replaces a newer one.
create or replace function arc_store_language_scale(community text, embedding_model text, language text,
                                                    kb_version bigint, floor double precision,
                                                    match double precision, near_miss double precision,
                                                    language_drop double precision, pairs integer)
returns void
language sql
set search_path = public, extensions
as $$
  insert into status_language_scales as s (community, embedding_model, language, kb_version, floor, match,
                                           near_miss, language_drop, pairs, measured_at)
  values (arc_store_language_scale.community, arc_store_language_scale.embedding_model,
          arc_store_language_scale.language, arc_store_language_scale.kb_version,
          arc_store_language_scale.floor, arc_store_language_scale.match, arc_store_language_scale.near_miss,
          arc_store_language_scale.language_drop, arc_store_language_scale.pairs, now())
  on conflict (community, embedding_model, language) do update
     set kb_version = excluded.kb_version, floor = excluded.floor, match = excluded.match,
         near_miss = excluded.near_miss, language_drop = excluded.language_drop, pairs = excluded.pairs,
         measured_at = excluded.measured_at
   where s.kb_version <= excluded.kb_version
$$;

select arc_service_role_only('function', 'arc_store_language_scale(text, text, text, bigint, double precision, double precision, double precision, double precision, integer)');
