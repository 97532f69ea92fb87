-- The lock that keeps a community's vector table whole (arc_community_vector_index): its build
-- takes it alone, and every write of that community's chunks shares it
-- (arc_community_vector_tables_of) before it looks for the table. So a load that
-- writes while the table is made waits for it and then writes into it, and a build waits for the
-- loads under way and copies their rows: no chunk is ever left out. Held to the end of the
-- transaction. The communities share 256 locks by the hash of their name
-- (arc_community_vectors_slot), so a statement that writes thousands of communities (a delete of
-- them all) holds at most 256 of Postgres's lock slots; a build then holds off the writers of
-- about one community in 256 besides its own.
create or replace function arc_community_vectors_lock(community text, exclusive boolean)
returns void
language plpgsql
set search_path = public, extensions
as $$
declare
  slot integer := arc_community_vectors_slot(community);
begin
  if exclusive then
    perform pg_advisory_xact_lock(hashtext('arc_community_vectors'), slot);
  else
    perform pg_advisory_xact_lock_shared(hashtext('arc_community_vectors'), slot);
  end if;
end
$$;

select arc_service_role_only('function', 'arc_community_vectors_lock(text, boolean)');
