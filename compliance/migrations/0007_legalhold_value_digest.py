from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("compliance", "0006_chaincheck_scope")]

    operations = [
        migrations.AddField(
            model_name="legalhold",
            name="value_digest",
            field=models.CharField(blank=True, max_length=64),
        ),
    ]
