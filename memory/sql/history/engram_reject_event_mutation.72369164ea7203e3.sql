CREATE OR REPLACE FUNCTION engram_reject_event_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the episodic log is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER memory_event_append_only BEFORE UPDATE OR DELETE ON memory_event
    FOR EACH ROW EXECUTE FUNCTION engram_reject_event_mutation();

CREATE TRIGGER memory_event_no_truncate BEFORE TRUNCATE ON memory_event
    FOR EACH STATEMENT EXECUTE FUNCTION engram_reject_event_mutation();
