-- 093: the chunks an answer put in its context, in [SOURCE n] order, kept with its query log row,
-- so that the keeper can confirm, on Questions asked, the passage that answered a resident's
-- question ("this passage answers it") as that resident's agent received it. Ids only: the text
-- stays in knowledge_chunks (a chunk gone since is simply not offered).
alter table query_log add column if not exists sources bigint[] not null default '{}';
