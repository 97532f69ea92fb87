-- 032: 020's word frequencies within one community. 030 keys bm25_terms by community and 031
-- drops bm25_query_terms(text), which 020's function read, so the vocabulary (worker/retrieve/
-- vocabulary.py) would count words of the whole knowledge base, or fail. A community reads its own
-- documents' spelling ("back yard" in one association's bylaws, "backyard" in another's); null
-- (a knowledge base of one community, or an old caller) sums each word over every community.
-- arc: repeatable (a function definition and its rights: applied again whenever this file changes)
drop function if exists arc_word_frequencies(text[]);

create or replace function arc_word_frequencies(words text[], community text default null)
returns table (word text, df bigint)
language sql stable
set search_path = public, extensions
as $$
  select w.word,
         case when not exists (select 1 from unnest(to_tsvector('english'::regconfig, w.word)))
              then -1  -- no lexeme at all: a stopword
              else coalesce((select max(s.df)
                             from (select sum(t.df) as df
                                   from unnest(to_tsvector('english'::regconfig, w.word)) q
                                   join bm25_terms t on t.lexeme = q.lexeme
                                   where arc_word_frequencies.community is null
                                      or t.community = arc_word_frequencies.community
                                   group by q.lexeme) s), 0)
         end::bigint
  from unnest(words) as w(word)
$$;

select arc_service_role_only('function', 'arc_word_frequencies(text[], text)');
