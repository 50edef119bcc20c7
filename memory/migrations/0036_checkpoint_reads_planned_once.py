"""The checkpoint reads' SQL functions in PL/pgSQL (docs/decisions/0116): PostgreSQL planned the
query of each non-inlined SQL function on every call (every latest restore and every row of a
listing page); a PL/pgSQL function's plan is kept for the session, and a checkpoint saved whole
skips the blob table."""

from django.db import migrations

from core.sqlrules import ApplySqlRule


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0035_checkpoint_blobs"),
    ]

    operations = [
        ApplySqlRule("memory_checkpoint_channels", "546e2829b5dcc09f", previous="d3d86a8ccbbf056c"),
        ApplySqlRule("memory_checkpoint_pending_writes", "f55e517f81aed7e2", previous="f30aa3ab807525c9"),
    ]
