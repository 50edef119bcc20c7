-- A memory's lexemes and their BM25 weights: the one source of its lexical vector
-- (memory_lexical_set) and of its postings (memory_lexical_postings). A content is two fields:
-- what it states and what it asks (its sentences ending in '?', maybe followed by '!', '?', a
-- closing quote or bracket; a sentence ends at white space after '.', '!' or '?', or after one of
-- them and a closing quote or bracket; white space is ASCII's, as in differences._mood). Per
-- lexeme, the BM25 saturation of its count among the stated sentences (memory_bm25_saturation,
-- their distinct lexemes as the length) plus 0.5 (ASKED_WEIGHT) times its saturation among the
-- asked ones: a question names what its answer is about and states nothing, so an asked word
-- counts half a stated one (decision 0121). A content without '?' is one field, as before: its
-- tsvector ``whole`` (to_tsvector('english', content), which the generated search column holds once
-- the row is written), so the common case parses the text no more than before.
-- Python twin: memory/semantic/models.py ASKED_WEIGHT.

CREATE OR REPLACE FUNCTION memory_lexical_weights(content text, whole tsvector)
    RETURNS TABLE (lexeme text, weight double precision)
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    stated tsvector;
    asked tsvector;
BEGIN
    IF position('?' IN coalesce(content, '')) = 0 THEN
        RETURN QUERY
            SELECT u.lexeme, memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(whole))
            FROM unnest(whole) AS u;
        RETURN;
    END IF;
    SELECT to_tsvector('english'::regconfig, coalesce(string_agg(s, ' ') FILTER (WHERE NOT q), '')),
           to_tsvector('english'::regconfig, coalesce(string_agg(s, ' ') FILTER (WHERE q), ''))
    INTO stated, asked
    FROM (SELECT s, s ~ '\?[!?"''”’)\]]*[ \t\r\n]*$' AS q
          FROM regexp_split_to_table(content, '(?<=[.!?])[ \t\r\n]+|(?<=[.!?]["''”’)\]])[ \t\r\n]+') AS s) parts;
    RETURN QUERY
        SELECT w.lexeme, sum(w.weight)
        FROM (SELECT u.lexeme, memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(stated))
                  AS weight
              FROM unnest(stated) AS u
              UNION ALL
              SELECT u.lexeme, 0.5::float8
                  * memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(asked))
              FROM unnest(asked) AS u) w
        GROUP BY w.lexeme;
END $$;

-- The share of a memory's words (runs of word characters) that its asked sentences hold, in [0, 1]
-- (0 without '?'): search scales the memory's cosine by 1 - (1 - ASKED_WEIGHT) * share, so the asked
-- part of its text counts half on the dense side as on the lexical side (decision 0121).

CREATE OR REPLACE FUNCTION memory_asked_share(content text) RETURNS real
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF position('?' IN coalesce(content, '')) = 0 THEN
        RETURN 0;
    END IF;
    RETURN (
        SELECT coalesce(sum(n) FILTER (WHERE q) / nullif(sum(n), 0), 0)::real
        FROM (SELECT s ~ '\?[!?"''”’)\]]*[ \t\r\n]*$' AS q,
                     (SELECT count(*) FROM regexp_matches(s, '\w+', 'g')) AS n
              FROM regexp_split_to_table(content, '(?<=[.!?])[ \t\r\n]+|(?<=[.!?]["''”’)\]])[ \t\r\n]+') AS s) parts);
END $$;
