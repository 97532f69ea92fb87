-- The community's vector leg, as a function of its own: the statement hybrid_search would
-- otherwise plan on every call (EXECUTE), with the community as a literal so that the plan reads
-- the partial index, and sorting off (else a type filter reads the community through the btree).
-- Here that plan is made once a session and kept: planning it looks at every index of
-- knowledge_chunks, one per community, about 0.7 ms of each search at 100 communities and
-- growing with their number (benchmarks/scale/communities/).
create or replace function arc_community_vector_leg_name(community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select arc_community_object_name('arc_vector_leg_', community)
$$;

select arc_service_role_only('function', 'arc_community_vector_leg_name(text)');
