from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("agents", "0004_idempotency_reads_and_withdrawals")]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="data_subject",
            field=models.CharField(
                blank=True,
                default="",
                help_text="The end user (data subject) the key acts for: it reads and writes only that subject's data (and data naming no subject). Blank: not bound.",
                max_length=200,
            ),
        ),
    ]
