-- The community's vector leg, as a function of its own: the statement hybrid_search would
-- otherwise plan on every call (EXECUTE), as it names the community's own vector table, with
-- sorting off (else a type filter reads the table whole and sorts it). Here that plan is made
-- once a session and kept.
create or replace function arc_community_vector_leg_name(community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select arc_community_object_name('arc_vector_leg_', community)
$$;

select arc_service_role_only('function', 'arc_community_vector_leg_name(text)');
