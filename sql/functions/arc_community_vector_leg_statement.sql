-- The leg's statement, in one place for arc_community_vector_leg and for hybrid_search, which plans it
-- itself for an index made by hand (one without a leg): $1 the question's vector, $2 the
-- document types (null: any), $3 binding only, $4 superseded included, $5 how many rows.
-- It reads the community's own vector table (arc_community_vector_index), ordered as its index is:
-- by the half-precision distance when the index is on embedding::halfvec(n), else by the
-- embedding as stored (an index made by hand); the distance returned is the full-precision one
-- either way.
create or replace function arc_community_vector_leg_statement(community text)
returns text
language sql stable parallel safe
set search_path = public, extensions
as $$
  select format('select v.id, v.embedding <=> $1 as distance
                   from %I v
                  where ($2 is null or (v.document_type || '''') = any ($2))
                    and (not $3 or v.is_binding)
                    and ($4 or v.superseded_by is null)
                  order by %s
                  limit $5', arc_community_vector_table_name(community),
                coalesce((select format('v.embedding::halfvec(%s) <=> $1::halfvec(%s)', t.dims, t.dims)
                            from (select substring(pg_get_indexdef(i.indexrelid) from 'halfvec\((\d+)\)') as dims
                                    from pg_index i
                                   where i.indexrelid = to_regclass(quote_ident(arc_community_vector_index_name(community)))
                                 ) t
                           where t.dims is not null),
                         'v.embedding <=> $1'))
$$;

select arc_service_role_only('function', 'arc_community_vector_leg_statement(text)');
