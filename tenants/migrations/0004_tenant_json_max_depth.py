import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0003_tenant_default_predicate_cardinality"),
    ]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="json_max_depth",
            field=models.PositiveSmallIntegerField(
                default=64,
                help_text="How deeply a JSON value sent to the API may nest (event payloads, memory metadata, "
                "checkpoint state, working-memory values); deeper is a 400 naming the field.",
                validators=[
                    django.core.validators.MinValueValidator(2),
                    django.core.validators.MaxValueValidator(200),
                ],
            ),
        ),
    ]
