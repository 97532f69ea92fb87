-- Remove these chunks' postings. Every kept posting had reached its floor, and nothing else
-- did: the lists stay exactly "every posting at or above the floor".
create or replace function bm25_postings_remove(ids bigint[])
returns void
language sql
set search_path = public, extensions
as $$
  with gone as (
    delete from bm25_postings p where p.chunk_id = any (ids) returning community, lexeme
  )
  update bm25_terms s set kept = s.kept - g.n
    from (select community, lexeme, count(*) as n from gone group by community, lexeme) g
   where s.community = g.community and s.lexeme = g.lexeme;
$$;

select arc_service_role_only('function', 'bm25_postings_remove(bigint[])');
