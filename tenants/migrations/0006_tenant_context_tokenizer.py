from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0005_tenant_roles"),
    ]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="context_tokenizer",
            field=models.CharField(
                blank=True,
                help_text="The tokenizer context assembly counts tokens with: a name from the ENGRAM_TOKENIZERS "
                "setting (blank: the default, the WordPiece tokenizer of all-MiniLM-L6-v2).",
                max_length=100,
            ),
        ),
    ]
