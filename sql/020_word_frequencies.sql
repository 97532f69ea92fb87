-- 020: how many chunks hold each of a few words, for the vocabulary the worker reads off the
-- knowledge base itself (worker/retrieve/vocabulary.py: "backyard" in a question and "back yard"
-- in the documents, or the reverse). One row per word: its document frequency as a BM25 lexeme,
-- 0 when no chunk holds it, -1 when it makes no lexeme at all (a stopword).
create or replace function arc_word_frequencies(words text[])
returns table (word text, df bigint)
language sql stable
set search_path = public, extensions
as $$
  select w, coalesce(max(q.df), -1)
  from unnest(words) as w
  left join lateral bm25_query_terms(w) q on true
  group by w
$$;

select arc_service_role_only('function', 'arc_word_frequencies(text[])');
