from django.db import migrations, models


class Migration(migrations.Migration):
    """The exact-duplicate rule's unique constraint per end user (decision 0078)."""

    dependencies = [("memory", "0028_checkpoint_agent_id_index")]

    operations = [
        migrations.RemoveConstraint(model_name="semanticmemory", name="semantic_live_content_uniq"),
        migrations.AddConstraint(
            model_name="semanticmemory",
            constraint=models.UniqueConstraint(
                condition=models.Q(("forgotten_at__isnull", True)),
                fields=("agent", "scope", "data_subject", "content_hash"),
                name="semantic_live_content_uniq",
            ),
        ),
    ]
