"""The lexical SQL rules run as plpgsql (decision 0118), as the checkpoint reads' do since 0036: a SQL
function that cannot be inlined is planned again by every statement that calls it (each memory
insert's lexical trigger), a plpgsql one once per connection. Same results; reversed, the SQL
versions come back."""

from django.db import migrations

from core.sqlrules import ApplySqlRule


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0036_checkpoint_reads_planned_once"),
    ]

    operations = [
        ApplySqlRule("memory_lexical_vector", "110448dd053f0e1c", previous="0adf406fbe0c01e0"),
        ApplySqlRule("memory_lexical_query", "406edc686b56d3ad", previous="675d37a73ad295bf"),
    ]
