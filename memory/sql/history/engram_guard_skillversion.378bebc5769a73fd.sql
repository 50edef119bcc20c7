CREATE OR REPLACE FUNCTION engram_guard_skillversion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'skill versions cannot be truncated' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.status = 'draft' THEN
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'skill version % (%) is %: it cannot be deleted', OLD.id, OLD.number, OLD.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.status = 'draft' THEN
        RAISE EXCEPTION 'skill version % was %: it cannot become a draft again', OLD.id, OLD.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (to_jsonb(NEW) - 'status' - 'status_changed_at' - 'retired_at')
       IS DISTINCT FROM (to_jsonb(OLD) - 'status' - 'status_changed_at' - 'retired_at') THEN
        RAISE EXCEPTION 'skill version % is %: its content is immutable (start a new draft)', OLD.id, OLD.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER memory_skillversion_immutable BEFORE UPDATE OR DELETE ON memory_skillversion
    FOR EACH ROW EXECUTE FUNCTION engram_guard_skillversion();

CREATE TRIGGER memory_skillversion_no_truncate BEFORE TRUNCATE ON memory_skillversion
    FOR EACH STATEMENT EXECUTE FUNCTION engram_guard_skillversion();
