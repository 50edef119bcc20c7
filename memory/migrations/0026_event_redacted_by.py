"""Every redaction names the decision that made it (issue 28).

``redacted_by``: the seq of the decision event that redacted the event. The append-only triggers
now let a redaction through only when it points at a decision later in the chain whose payload is a
redaction (``action`` ``events_redact``) naming the event in its runs of seqs (``redacts``), checked
once per statement over all the rows it redacted; and they never redact such a decision itself. So
the tenant's own role cannot redact an event without appending, to the chain, the decision that
accounts for it. The chain check verifies each account (and the compliance app its signature).

Events redacted before this migration were accounted for by count only. They are named here, once
per tenant, by one decision of ``job:migration`` marked ``legacy`` (the erasure receipts and
retention runs of their time are their account); the triggers refuse to let any later redaction
point at a legacy decision, so only this migration (the tables' owner, triggers off) links to one.
"""

from django.db import migrations, models

from core.sqlrules import ApplySqlRule

DROP_DECIDED = """
DROP TRIGGER IF EXISTS memory_event_redactions_decided ON memory_event;
DROP FUNCTION IF EXISTS engram_event_redactions_decided();
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
        ("memory", "0025_contradiction_decision_event"),
    ]

    operations = [
        migrations.AddField(
            model_name="event",
            name="redacted_by",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.RunSQL(migrations.RunSQL.noop, DROP_DECIDED),  # reversed after 0015's row rule is back
        ApplySqlRule("engram_event_redaction_only", "f5f65cf01678d227", previous="7e2b264c33bc332b"),
        ApplySqlRule(
            "engram_event_redactions_decided", "ec6f52ab36fecb72", reverse_sql=migrations.RunSQL.noop
        ),
        migrations.RunSQL(
            "SET CONSTRAINTS ALL IMMEDIATE; ALTER TABLE memory_event DISABLE TRIGGER memory_event_append_only; "
            "ALTER TABLE memory_event DISABLE TRIGGER memory_event_redactions_decided",
            migrations.RunSQL.noop,
        ),
        migrations.RunPython(account_legacy_redactions, migrations.RunPython.noop),
        migrations.RunSQL(
            "ALTER TABLE memory_event ENABLE TRIGGER memory_event_append_only; "
            "ALTER TABLE memory_event ENABLE TRIGGER memory_event_redactions_decided",
            migrations.RunSQL.noop,
        ),
    ]
