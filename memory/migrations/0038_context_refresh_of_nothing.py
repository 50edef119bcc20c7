"""A context refresh given no memory returns at once (decision 0118): an insert of memories without a
session no longer runs the refresh's statement (planned per call, ~0.3-0.5 ms of each such insert)
nor locks the context table. Same results; reversed, the previous version comes back."""

from django.db import migrations

from core.sqlrules import ApplySqlRule


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0037_sql_functions_planned_once"),
    ]

    operations = [
        ApplySqlRule("memory_context_refresh", "06c095e62f6f2808", previous="b8dac672f457282d"),
    ]
