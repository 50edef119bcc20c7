from django.db import migrations, models


class Migration(migrations.Migration):
    """The replay cache per agent and end user (docs/decisions/0099)."""

    dependencies = [
        ("agents", "0005_apikey_data_subject"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="idempotencyrecord",
            name="idempotency_agent_key_uniq",
        ),
        migrations.AddField(
            model_name="idempotencyrecord",
            name="data_subject",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddConstraint(
            model_name="idempotencyrecord",
            constraint=models.UniqueConstraint(
                fields=("agent", "data_subject", "key"), name="idempotency_agent_key_uniq"
            ),
        ),
    ]
