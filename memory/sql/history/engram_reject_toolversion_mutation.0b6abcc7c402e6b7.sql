CREATE OR REPLACE FUNCTION engram_reject_toolversion_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'tool versions are immutable: % on % is not allowed (save a new version)', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER memory_toolversion_immutable BEFORE UPDATE OR DELETE ON memory_toolversion
    FOR EACH ROW EXECUTE FUNCTION engram_reject_toolversion_mutation();

CREATE TRIGGER memory_toolversion_no_truncate BEFORE TRUNCATE ON memory_toolversion
    FOR EACH STATEMENT EXECUTE FUNCTION engram_reject_toolversion_mutation();
