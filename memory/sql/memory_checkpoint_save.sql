-- A checkpoint save's lock, checks and inserts in one call. VOLATILE: each statement takes a fresh
-- snapshot, so the checks after the lock see every save of the stream committed before it was granted.
-- Answers (id, step, fingerprint, channels) of the inserted checkpoint, all NULL when nothing was
-- inserted (the key is used, the step is not after the latest, or the last step is reached).
-- p_blob_*: the channel values of the save's new versions, one array element per blob (a blob
-- already stored under its (channel, version) is kept); saved_channels: the checkpoint's channel
-- values as memory_checkpoint_channels gives them (what its cached document holds).
-- Python twins: memory/checkpoints/services.py _replay_or_refuse (the step and key rule under the
-- lock), memory/checkpoints/models.py fingerprint_prefix (the document the fingerprint finishes).

CREATE OR REPLACE FUNCTION memory_checkpoint_save(
    lock_name text, p_session_id text, p_agent_id bigint, p_key text, p_step bigint,
    p_max_step bigint, p_state jsonb, p_plan jsonb, p_schema_version integer,
    p_created_at timestamptz, p_fingerprint_prefix text, p_data_subject text, p_ns text,
    p_metadata jsonb, p_parent_key text, p_serialized_type text, p_serialized bytea,
    p_channel_versions jsonb, p_blob_channels text[], p_blob_versions text[], p_blob_types text[],
    p_blob_values bytea[],
    OUT saved_id bigint, OUT saved_step bigint, OUT saved_fingerprint text, OUT saved_channels text
) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    latest bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(lock_name, 0));
    IF EXISTS (SELECT FROM memory_checkpoint WHERE session_id = p_session_id
               AND agent_id = p_agent_id AND idempotency_key = p_key) THEN
        RETURN;
    END IF;
    SELECT step_index INTO latest FROM memory_checkpoint
        WHERE session_id = p_session_id AND agent_id = p_agent_id
        ORDER BY step_index DESC LIMIT 1;
    -- no step given: the stream's next one
    saved_step := COALESCE(p_step, latest + 1, 0);
    IF saved_step <= latest OR saved_step > p_max_step THEN
        saved_step := NULL;
        RETURN;
    END IF;
    -- the step is the last key of the fingerprinted document (fingerprint_prefix)
    saved_fingerprint := encode(sha256(convert_to(p_fingerprint_prefix || saved_step || '}', 'UTF8')), 'hex');
    INSERT INTO memory_checkpoint (session_id, step_index, idempotency_key, state, plan,
        schema_version, agent_id, data_subject, created_at, fingerprint, checkpoint_ns, parent_key,
        metadata, serialized_type, serialized, channel_versions)
    VALUES (p_session_id, saved_step, p_key, p_state, p_plan, p_schema_version, p_agent_id,
        p_data_subject, p_created_at, saved_fingerprint, p_ns, p_parent_key, p_metadata,
        p_serialized_type, p_serialized, p_channel_versions)
    RETURNING id INTO saved_id;
    IF p_channel_versions = '{}'::jsonb THEN
        saved_channels := '{}';
        RETURN;
    END IF;
    IF cardinality(p_blob_channels) > 0 THEN
        INSERT INTO memory_checkpointblob (session_id, agent_id, checkpoint_ns, channel, version,
            value_type, value, data_subject, created_at)
        SELECT p_session_id, p_agent_id, p_ns, c, v, t, b, p_data_subject, p_created_at
        FROM unnest(p_blob_channels, p_blob_versions, p_blob_types, p_blob_values) AS n(c, v, t, b)
        ON CONFLICT (session_id, agent_id, checkpoint_ns, channel, version) DO NOTHING;
    END IF;
    saved_channels := memory_checkpoint_channels(p_session_id, p_agent_id, p_ns, p_channel_versions)::text;
END
$$;
