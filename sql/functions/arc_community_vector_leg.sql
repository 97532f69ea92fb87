-- Create (or replace) the community's vector leg function, arc_vector_leg_<community>, with the
-- statement of arc_community_vector_leg_statement, and give it to the service role only.
create or replace function arc_community_vector_leg(community text)
returns text
language plpgsql
set search_path = public, extensions
as $$
declare
  name text := arc_community_vector_leg_name(community);
begin
  execute format($f$
    create or replace function %I(query_embedding vector, document_types text[], binding_only boolean,
                                  include_superseded boolean, match_count integer)
    returns table (id bigint, distance double precision)
    language plpgsql stable
    set search_path = public, extensions
    set enable_seqscan = off
    set enable_sort = off
    set plan_cache_mode = force_generic_plan
    as $body$
    begin
      return query %s;
    end
    $body$
  $f$, name, arc_community_vector_leg_statement(community));
  perform arc_service_role_only('function', format('%I(vector, text[], boolean, boolean, integer)', name));
  return name;
end
$$;

select arc_service_role_only('function', 'arc_community_vector_leg(text)');
