-- The episodic log (and, from compliance, the anchors) refuse TRUNCATE: memory_event's UPDATE and
-- DELETE are guarded by engram_event_redaction_only.

CREATE OR REPLACE FUNCTION engram_reject_event_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the episodic log is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE OR REPLACE TRIGGER memory_event_no_truncate BEFORE TRUNCATE ON memory_event
    FOR EACH STATEMENT EXECUTE FUNCTION engram_reject_event_mutation();
