-- The communities a client may name (view knowledge_communities, 030), for Supabase's RPC route
-- (PostgREST calls functions; the worker reads no table there).
create or replace function community_names()
returns table (community text)
language sql stable
set search_path = public, extensions
as $$
  select k.community from knowledge_communities k order by k.community
$$;

select arc_service_role_only('function', 'community_names()');
