-- The knowledge base's own spelling of a question's compounds (worker/retrieve/vocabulary.py):
-- "backyard" in a question and "back yard" in the documents, or "lawn mower" and "lawnmower".
-- words: the question's words, lower case, in order. Returned, in this order and each once, the
-- words the full-text leg should also read, none of them among the question's:
--   * a word of at least split_min letters that no chunk holds, split where both halves (each of
--     at least part_min letters) are the documents' words: the split whose rarer half is commonest;
--   * two adjacent words (each of at least part_min letters, neither a stopword) joined, where the
--     documents write them as one.
-- Frequencies are arc_word_frequencies' (per community; null sums over every community). Asked
-- inside arc_answer, so the search reads the spelling of the knowledge base it searches, in the
-- same call.
create or replace function arc_compound_spellings(
  words     text[],
  community text default null,
  split_min integer default 7,
  part_min  integer default 3
)
returns text[]
language sql stable
set search_path = public, extensions
as $$
  with question as (
    select w.word, w.place from unnest(coalesce(words, '{}')) with ordinality as w(word, place)
  ), splits as (
    select distinct q.word, substr(q.word, 1, i) as head, substr(q.word, i + 1) as tail
    from question q, generate_series(part_min, length(q.word) - part_min) as i
    where length(q.word) >= split_min
  ), joins as (
    select a.place, a.word as head, b.word as tail, a.word || b.word as joined
    from question a join question b on b.place = a.place + 1
    where length(a.word) >= part_min and length(b.word) >= part_min
  ), looked_up as (
    select f.word, f.df
    from arc_word_frequencies(array(select word from question
                                    union select head from splits union select tail from splits
                                    union select joined from joins),
                              arc_compound_spellings.community) f
  ), split_chosen as (
    -- for each word no chunk holds, its split whose rarer half is commonest (then the greatest
    -- halves, as the worker's Python reading compared them)
    select distinct on (s.word) s.word, s.head, s.tail
    from splits s
    join looked_up w on w.word = s.word and w.df = 0
    join looked_up h on h.word = s.head and h.df > 0
    join looked_up t on t.word = s.tail and t.df > 0
    order by s.word, least(h.df, t.df) desc, s.head collate "C" desc, s.tail collate "C" desc
  ), extra as (
    -- the splits, word by word, then the joins in the question's order
    select e.word, 1 as part, c.word as key, e.nth as nth, 0 as place
    from split_chosen c, unnest(array[c.head, c.tail]) with ordinality as e(word, nth)
    union all
    select j.joined, 2, '', 0, j.place
    from joins j
    join looked_up h on h.word = j.head and h.df >= 0
    join looked_up t on t.word = j.tail and t.df >= 0
    join looked_up b on b.word = j.joined and b.df > 0
  ), firsts as (
    select distinct on (x.word) x.*
    from extra x
    where x.word <> all (coalesce(words, '{}'))
    order by x.word, x.part, x.key collate "C", x.nth, x.place
  )
  select coalesce(array_agg(f.word order by f.part, f.key collate "C", f.nth, f.place), '{}')
  from firsts f
$$;

select arc_service_role_only('function', 'arc_compound_spellings(text[], text, integer, integer)');
