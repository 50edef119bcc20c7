"""Every redaction names the decision that made it (issue 28).

``redacted_by``: the seq of the decision event that redacted the event. The append-only trigger now
lets a redaction through only when it points at a decision later in the chain whose payload is a
redaction (``action`` ``events_redact``) naming the event in its runs of seqs (``redacts``), and
never redacts such a decision itself: the tenant's own role cannot redact an event without
appending, to the chain, the decision that accounts for it. The chain check verifies each account
(and the compliance app its signature).

Events redacted before this migration were accounted for by count only. They are named here, once
per tenant, by one decision of ``job:migration`` marked ``legacy`` (the erasure receipts and
retention runs of their time are their account); the trigger refuses to let any later redaction
point at a legacy decision, so only this migration (the tables' owner, trigger off) links to one.
"""

from django.db import migrations, models

RUNS_HOLD = """
CREATE OR REPLACE FUNCTION engram_runs_hold(runs jsonb, target bigint) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    lo integer := 0;
    hi integer := jsonb_array_length(runs) - 1;
    mid integer;
BEGIN
    -- runs: [[first, last], ...] sorted and disjoint (memory.episodic.models.seq_runs)
    WHILE lo <= hi LOOP
        mid := (lo + hi) / 2;
        IF target < (runs -> mid ->> 0)::bigint THEN
            hi := mid - 1;
        ELSIF target > (runs -> mid ->> 1)::bigint THEN
            lo := mid + 1;
        ELSE
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;
"""

DECIDED = """
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
       -- a decision that accounts for redactions is kept for good
       AND NOT (OLD.kind = 'decision' AND OLD.payload_index ->> 'action' = 'events_redact')
       -- and the decision this redaction points at names the event
       AND EXISTS (
           SELECT 1 FROM memory_event d
           WHERE d.seq = NEW.redacted_by AND d.seq > OLD.seq AND d.kind = 'decision'
             AND d.redacted_at IS NULL AND d.payload_index ->> 'action' = 'events_redact'
             AND NOT d.payload_index ? 'legacy'
             AND jsonb_typeof(d.payload_index -> 'redacts') = 'array'
             AND engram_runs_hold(d.payload_index -> 'redacts', OLD.seq))
    THEN
        RETURN NEW;  -- a decided redaction: the body goes, the chained fields stay
    END IF;
    RAISE EXCEPTION 'the episodic log is append-only: % on % is not allowed (only a redaction that '
        'a decision later in the chain names is)', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
"""

# 0015's function, as it was
UNDECIDED = """
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
DROP FUNCTION IF EXISTS engram_runs_hold(jsonb, bigint);
"""

LEGACY_BASIS = "redacted before redactions named their decision; the erasure receipts and retention runs of their time account for them"


def account_legacy_redactions(apps, schema_editor):
    """Name the events redacted before this migration in one ``legacy`` decision appended to the
    chain (format 2, as ``events_append`` writes it) and point them at it. Runs as the tables'
    owner with the append-only trigger off (see the operations). Nothing when there are none."""
    import secrets

    from django.utils import timezone

    from core.canonical_json import canonical_json
    from memory.episodic.models import body_digest, chain_hash, hashed_header, iso_utc, runs_text, seq_runs

    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT seq FROM memory_event WHERE redacted_at IS NOT NULL AND redacted_by IS NULL ORDER BY seq"
        )
        seqs = [int(row[0]) for row in cursor.fetchall()]
        if not seqs:
            return
        Agent = apps.get_model("agents", "Agent")
        agent, _ = Agent.objects.get_or_create(
            name="engram-system", defaults={"role": "system", "is_active": False}
        )
        cursor.execute("SELECT last_seq, last_hash FROM memory_chainhead WHERE id = 1 FOR UPDATE")
        last_seq, prev = cursor.fetchone()
        seq = int(last_seq) + 1
        runs = seq_runs(seqs)
        payload = canonical_json(
            {
                "action": "events_redact",
                "redacts": runs,
                "count": len(seqs),
                "legacy": True,
                "basis": LEGACY_BASIS,
            },
            root="payload",
        )
        content = f"Events redacted before redactions named their decision: {len(seqs)} ({runs_text(runs)})."
        now = timezone.now()
        salt = secrets.token_hex(16)
        digest = body_digest(salt=salt, content=content, payload_json=payload)
        header = hashed_header(
            session_id="compliance:lifecycle",
            execution_id=None,
            agent_id=agent.pk,
            actor="job:migration",
            role="system",
            kind="decision",
            occurred_at=now,
            recorded_at=now,
        )
        hash_value = chain_hash(seq=seq, prev_hash=prev, header=header, digest=digest)
        cursor.execute(
            "INSERT INTO memory_event (seq, session_id, execution_id, agent_id, role, kind, actor, "
            "data_subject, content, payload_json, occurred_at, recorded_at, hash_version, body_salt, "
            "body_digest, prev_hash, hash) VALUES (%s, 'compliance:lifecycle', NULL, %s, 'system', "
            "'decision', 'job:migration', '', %s, %s, %s, %s, 2, %s, %s, %s, %s)",
            [seq, agent.pk, content, payload, iso_utc(now), iso_utc(now), salt, digest, prev, hash_value],
        )
        cursor.execute(
            "UPDATE memory_chainhead SET last_seq = %s, last_hash = %s WHERE id = 1", [seq, hash_value]
        )
        cursor.execute(
            "UPDATE memory_event SET redacted_by = %s WHERE redacted_at IS NOT NULL AND redacted_by IS NULL",
            [seq],
        )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0003_apikey_curate_scope"),
        ("memory", "0024_drop_semantic_search_gin"),
    ]

    operations = [
        migrations.AddField(
            model_name="event",
            name="redacted_by",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.RunSQL(RUNS_HOLD + DECIDED, UNDECIDED),
        migrations.RunSQL(
            "SET CONSTRAINTS ALL IMMEDIATE; ALTER TABLE memory_event DISABLE TRIGGER memory_event_append_only",
            migrations.RunSQL.noop,
        ),
        migrations.RunPython(account_legacy_redactions, migrations.RunPython.noop),
        migrations.RunSQL(
            "ALTER TABLE memory_event ENABLE TRIGGER memory_event_append_only", migrations.RunSQL.noop
        ),
    ]
