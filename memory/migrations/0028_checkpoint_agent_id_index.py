"""An agent's checkpoints across sessions, newest first: LangGraph's list without a thread
(``memory.checkpoints.selectors.checkpoint_tuples_all``, docs/decisions/0087)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0027_sql_rules_from_files"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="checkpoint",
            index=models.Index(fields=["agent", "id"], name="checkpoint_agent_id_idx"),
        ),
    ]
