"""The compliance app's SQL rules come from their files: ``compliance/sql/<name>.sql``
(``core.sqlrules``; see memory's migration 0027). The anchors' triggers are what migration 0001
created, so applying them changes nothing and reversing undoes nothing.
"""

from django.db import migrations

from core.sqlrules import ApplySqlRule


class Migration(migrations.Migration):
    dependencies = [
        ("compliance", "0007_legalhold_value_digest"),
        ("memory", "0027_sql_rules_from_files"),  # engram_reject_event_mutation from its file
    ]

    operations = [
        ApplySqlRule("compliance_anchor_append_only", "f608c08fecddcab7", reverse_sql=migrations.RunSQL.noop),
    ]
