-- The channel values of one checkpoint as the API shows them: a JSON object, channel ->
-- {"version", "value": {"type", "data": base64}}, one entry per channel its channel_versions
-- names; "value" is the blob of its stream (session, agent, namespace) stored under that
-- (channel, version), absent when none is (LangGraph's savers assemble channel_values the same way).
-- PL/pgSQL, not SQL: it is called once per row read (the latest, every row of a listing page) and
-- PostgreSQL plans a non-inlined SQL function's query on every call, a PL/pgSQL one's once per
-- session; a checkpoint saved whole (no channel_versions) reads no table.

CREATE OR REPLACE FUNCTION memory_checkpoint_channels(
    p_session_id text, p_agent_id bigint, p_ns text, p_versions jsonb
) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_versions = '{}'::jsonb THEN
        RETURN '{}'::jsonb;
    END IF;
    RETURN (
        SELECT coalesce(jsonb_object_agg(v.channel, CASE WHEN b.id IS NULL
                   THEN jsonb_build_object('version', v.version)
                   ELSE jsonb_build_object('version', v.version, 'value', jsonb_build_object(
                       'type', b.value_type, 'data', translate(encode(b.value, 'base64'), E'\n', '')))
               END), '{}'::jsonb)
        FROM jsonb_each_text(p_versions) AS v(channel, version)
        LEFT JOIN memory_checkpointblob b
          ON b.session_id = p_session_id AND b.agent_id = p_agent_id AND b.checkpoint_ns = p_ns
         AND b.channel = v.channel AND b.version = v.version
    );
END
$$;
