-- Which of the 256 vector-table locks a community shares (arc_community_vectors_lock), by the hash
-- of its name. Every statement that takes several of them takes them in this order
-- (arc_community_vector_tables_of, arc_community_vector_indexes), so a build and the writers
-- never wait on each other in a cycle.
create or replace function arc_community_vectors_slot(community text)
returns integer
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select hashtext(community) & 255
$$;

select arc_service_role_only('function', 'arc_community_vectors_slot(text)');
