-- What a process's copy of a community's confirmations is kept for (worker/retrieve/confirmed.py):
-- the community's knowledge-base version and the state of its confirmations, as one text (a
-- write, a delete or a re-confirmation moves it; so does any change of the documents, which may
-- make a confirmation stale).
create or replace function arc_confirmation_stamp(community text)
returns text
language sql stable
set search_path = public, extensions
as $$
  select knowledge_base_version(arc_confirmation_stamp.community)::text || ':' || count(*) || ':'
         || coalesce(max(c.id), 0) || ':' || coalesce(max(extract(epoch from c.created_at)), 0)
  from answer_confirmations c
  where c.community = arc_confirmation_stamp.community
$$;

select arc_service_role_only('function', 'arc_confirmation_stamp(text)');
