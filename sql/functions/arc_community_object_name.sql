-- The names of a community's objects: readable in \dt, \di and \df, and at most 63 characters
-- for any community name (030) after a prefix of up to 22 (arc_vectors_, arc_hnsw_, arc_vkey_,
-- arc_vector_leg_; no one of them begins another, so two communities' objects never share a name). (The cut at 41 characters stays as it was
-- first written: a name that changed would orphan an existing index or leg.)
create or replace function arc_community_object_name(prefix text, community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select prefix || case when length(community) <= 41 then community
                        else left(community, 32) || '_' || left(md5(community), 8) end
$$;

select arc_service_role_only('function', 'arc_community_object_name(text, text)');
