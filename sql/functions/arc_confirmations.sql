-- A community's confirmed answers with what they point at today: each passage confirmation
-- resolved to the chunk of its document whose text is still the confirmed text (the nearest to
-- where it stood), and its state: 'confirmed', or 'stale' with the reason (the document was
-- deleted, the passage's text changed or went, the document is superseded, an amendment replaces
-- its section; for a "none", the community gained a document since, which may address it).
-- Computed from the chunks as they are, so it never serves what they no longer say.
create or replace function arc_confirmations(community text)
returns table (id bigint, query text, answer text, document_id text, section_path text,
               embedding real[], embedding_model text, created_at timestamptz,
               chunk_id bigint, state text, reason text)
language sql stable
set search_path = public, extensions
as $$
  select c.id, c.query, c.answer, c.document_id, c.section_path, c.embedding, c.embedding_model, c.created_at,
         case when c.answer = 'passage' and k.id is not null and k.superseded_by is null
                   and not (k.metadata ? 'amended_by') then k.id end,
         case when c.answer = 'none' and g.gained is not null then 'stale'
              when c.answer = 'none' then 'confirmed'
              when k.id is null or k.superseded_by is not null or k.metadata ? 'amended_by' then 'stale'
              else 'confirmed' end,
         case when c.answer = 'none' and g.gained is not null then 'the community gained a document since: ' || g.gained
              when c.answer = 'none' then null
              when k.id is null and not exists (
                     select 1 from knowledge_chunks d
                     where d.community = c.community and d.document_id = c.document_id)
                then 'the document was deleted'
              when k.id is null then 'the passage changed or was removed'
              when k.superseded_by is not null then 'the document is superseded by ' || k.superseded_by
              when k.metadata ? 'amended_by' then 'an amendment replaces its section: ' || (k.metadata ->> 'amended_by')
         end
  from answer_confirmations c
  cross join (select coalesce(array_agg(distinct d.document_id), '{}') as ids
                from knowledge_chunks d where d.community = arc_confirmations.community) held
  left join lateral (
    select min(now_held) as gained
    from unnest(held.ids) now_held
    where c.answer = 'none' and c.documents_then is not null and not now_held = any (c.documents_then)
  ) g on true
  left join lateral (
    select k.id, k.superseded_by, k.metadata
    from knowledge_chunks k
    where k.community = c.community and k.document_id = c.document_id and md5(k.content) = c.content_md5
    order by abs(k.chunk_index - c.chunk_index), k.id
    limit 1
  ) k on c.answer = 'passage'
  where c.community = arc_confirmations.community
  order by c.id
$$;

select arc_service_role_only('function', 'arc_confirmations(text)');
