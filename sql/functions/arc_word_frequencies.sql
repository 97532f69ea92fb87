-- How many chunks hold each of a few words, for the vocabulary the worker reads off the knowledge
-- base itself (worker/retrieve/vocabulary.py: "backyard" in a question and "back yard" in the
-- documents, or the reverse). One row per word: its document frequency as a BM25 lexeme, 0 when no
-- chunk holds it, -1 when it makes no lexeme at all (a stopword). Within one community, which reads
-- its own documents' spelling; null (a knowledge base of one community, or an old caller) sums each
-- word over every community.
-- Before communities: (words).
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
