-- The language scales stored for a community and embedding model at one knowledge base version (043).
create or replace function arc_language_scales(community text, embedding_model text, kb_version bigint)
returns table (language text, floor double precision, match double precision, near_miss double precision,
               language_drop double precision, pairs integer)
language sql stable
set search_path = public, extensions
as $$
  select s.language, s.floor, s.match, s.near_miss, s.language_drop, s.pairs
  from status_language_scales s
  where s.community = arc_language_scales.community
    and s.embedding_model = arc_language_scales.embedding_model
    and s.kb_version = arc_language_scales.kb_version
  order by s.language
$$;

select arc_service_role_only('function', 'arc_language_scales(text, text, bigint)');
