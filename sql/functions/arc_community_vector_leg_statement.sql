-- The leg's statement, in one place for arc_community_vector_leg and for hybrid_search, which plans it
-- itself for an index made by hand (one without a leg): $1 the question's vector, $2 the
-- document types (null: any), $3 binding only, $4 superseded included, $5 how many rows.
create or replace function arc_community_vector_leg_statement(community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select format('select c.id, c.embedding <=> $1 as distance
                   from knowledge_chunks c
                  where c.community = %L
                    and ($2 is null or (c.document_type || '''') = any ($2))
                    and (not $3 or c.is_binding)
                    and ($4 or c.superseded_by is null)
                  order by c.embedding <=> $1
                  limit $5', community)
$$;

select arc_service_role_only('function', 'arc_community_vector_leg_statement(text)');
