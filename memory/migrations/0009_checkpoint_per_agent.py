"""Checkpoints are per agent within a session: uniqueness of steps and keys per (session, agent).

The old constraints were stricter than the new ones, so existing rows always satisfy the new ones.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0008_event_chain_v2"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="checkpoint", name="checkpoint_session_step_uniq"),
        migrations.RemoveConstraint(model_name="checkpoint", name="checkpoint_session_key_uniq"),
        migrations.AddConstraint(
            model_name="checkpoint",
            constraint=models.UniqueConstraint(
                fields=("session_id", "agent", "step_index"), name="checkpoint_session_agent_step_uniq"
            ),
        ),
        migrations.AddConstraint(
            model_name="checkpoint",
            constraint=models.UniqueConstraint(
                fields=("session_id", "agent", "idempotency_key"), name="checkpoint_session_agent_key_uniq"
            ),
        ),
    ]
