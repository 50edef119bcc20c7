CREATE OR REPLACE FUNCTION engram_event_redaction_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.redacted_at IS NULL AND NEW.redacted_at IS NOT NULL
       AND NEW.content = '' AND NEW.payload_json = '{}' AND NEW.body_salt = '' AND NEW.data_subject = ''
       AND (NEW.id, NEW.seq, NEW.session_id, NEW.execution_id, NEW.agent_id, NEW.actor, NEW.role,
            NEW.kind, NEW.occurred_at, NEW.recorded_at, NEW.hash_version, NEW.body_digest,
            NEW.prev_hash, NEW.hash)
           IS NOT DISTINCT FROM
           (OLD.id, OLD.seq, OLD.session_id, OLD.execution_id, OLD.agent_id, OLD.actor, OLD.role,
            OLD.kind, OLD.occurred_at, OLD.recorded_at, OLD.hash_version, OLD.body_digest,
            OLD.prev_hash, OLD.hash)
    THEN
        RETURN NEW;  -- a redaction: the body goes, the chained fields stay
    END IF;
    RAISE EXCEPTION 'the episodic log is append-only: % on % is not allowed (only a redaction is)',
        TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END
$$;

DROP TRIGGER memory_event_append_only ON memory_event;

CREATE TRIGGER memory_event_append_only BEFORE UPDATE OR DELETE ON memory_event
    FOR EACH ROW EXECUTE FUNCTION engram_event_redaction_only();
