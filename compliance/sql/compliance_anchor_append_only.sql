-- The signed anchors are append-only: memory's engram_reject_event_mutation refuses UPDATE, DELETE
-- and TRUNCATE on compliance_anchor.

CREATE OR REPLACE TRIGGER compliance_anchor_append_only BEFORE UPDATE OR DELETE ON compliance_anchor
    FOR EACH ROW EXECUTE FUNCTION engram_reject_event_mutation();

CREATE OR REPLACE TRIGGER compliance_anchor_no_truncate BEFORE TRUNCATE ON compliance_anchor
    FOR EACH STATEMENT EXECUTE FUNCTION engram_reject_event_mutation();
