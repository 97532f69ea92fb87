-- Open a new generation in every community (or the one named) whose live avgdl drifted more
-- than 5% (or always, with force). Returns whether it opened any.
-- Before communities: (force).
drop function if exists bm25_refresh(boolean);
create or replace function bm25_refresh(force boolean default false, community_name text default null)
returns boolean
language plpgsql
set search_path = public, extensions
as $$
declare
  opened boolean := false;
  corpus bm25_corpus;
  live double precision;
begin
  for corpus in select * from bm25_corpus b
                 where community_name is null or b.community = community_name order by b.community loop
    live := corpus.total_length::double precision / nullif(corpus.n_docs, 0);
    continue when live is null;
    continue when not force and corpus.avgdl_indexed is not null
                  and abs(live - corpus.avgdl_indexed) <= 0.05 * corpus.avgdl_indexed;
    update bm25_corpus b set avgdl_indexed = live, generation = b.generation + 1
     where b.community = corpus.community;
    opened := true;
  end loop;
  return opened;
end
$$;

select arc_service_role_only('function', 'bm25_refresh(boolean, text)');
