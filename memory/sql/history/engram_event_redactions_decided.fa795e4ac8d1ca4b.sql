CREATE OR REPLACE FUNCTION engram_event_redactions_decided() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    undecided bigint;
BEGIN
    WITH redacted_now AS (  -- the rows this statement redacted
        SELECT n.seq, n.redacted_by FROM new_rows n JOIN prior_rows o ON o.id = n.id
        WHERE o.redacted_at IS NULL AND n.redacted_at IS NOT NULL
    ), decided AS (
        SELECT d.seq AS decision,
               range_agg(int8range((r ->> 0)::bigint, (r ->> 1)::bigint, '[]')) AS seqs
        FROM (SELECT DISTINCT redacted_by FROM redacted_now) b
        JOIN memory_event d ON d.seq = b.redacted_by
        CROSS JOIN LATERAL jsonb_array_elements(d.payload_index -> 'redacts') r
        WHERE d.kind = 'decision' AND d.redacted_at IS NULL
          AND d.payload_index ->> 'action' = 'events_redact' AND NOT d.payload_index ? 'legacy'
          AND jsonb_typeof(d.payload_index -> 'redacts') = 'array'
        GROUP BY d.seq
    )
    SELECT n.seq INTO undecided
    FROM redacted_now n LEFT JOIN decided ON decided.decision = n.redacted_by
    WHERE decided.seqs IS NULL OR NOT (n.seq <@ decided.seqs)
    LIMIT 1;
    IF undecided IS NOT NULL THEN
        RAISE EXCEPTION 'the episodic log is append-only: event #% may be redacted only by a decision '
            'later in the chain that names it', undecided USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_event_redactions_decided AFTER UPDATE ON memory_event
    REFERENCING OLD TABLE AS prior_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION engram_event_redactions_decided();
