-- The pending writes of one checkpoint (its stream and idempotency key), as the API shows them: a
-- JSON array of {"task_id", "task_path", "channel", "idx", "value": {"type", "data": base64}} in
-- (task_path, task_id, idx) order (LangGraph's writes_sort_key).
-- Python twin: memory/checkpoints/models.py CheckpointWrite.document (one write's shape).

CREATE OR REPLACE FUNCTION memory_checkpoint_pending_writes(
    p_session_id text, p_agent_id bigint, p_ns text, p_key text
) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'task_id', w.task_id, 'task_path', w.task_path, 'channel', w.channel, 'idx', w.idx,
               'value', jsonb_build_object(
                   'type', w.value_type,
                   'data', translate(encode(w.value, 'base64'), E'\n', ''))
           ) ORDER BY w.task_path, w.task_id, w.idx), '[]'::jsonb)
    FROM memory_checkpointwrite w
    WHERE w.session_id = p_session_id AND w.agent_id = p_agent_id AND w.checkpoint_ns = p_ns
      AND w.checkpoint_key = p_key
$$;
