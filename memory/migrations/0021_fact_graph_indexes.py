from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0020_memory_context"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(
                condition=models.Q(("object_entity__isnull", False), ("status__in", ["active", "disputed"])),
                fields=["subject", "id"],
                include=("object_entity",),
                name="fact_graph_out_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(
                condition=models.Q(("object_entity__isnull", False), ("status__in", ["active", "disputed"])),
                fields=["object_entity", "id"],
                include=("subject",),
                name="fact_graph_in_idx",
            ),
        ),
    ]
