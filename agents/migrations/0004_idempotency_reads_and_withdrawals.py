import django.core.serializers.json
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("agents", "0003_apikey_curate_scope")]

    operations = [
        migrations.AlterField(
            model_name="idempotencyrecord",
            name="response_body",
            field=models.JSONField(encoder=django.core.serializers.json.DjangoJSONEncoder, null=True),
        ),
        migrations.AddField(
            model_name="idempotencyrecord",
            name="withdrawn_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
