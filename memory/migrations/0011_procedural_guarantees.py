"""Procedural memory's guarantees that the ORM cannot express, and who may do what.

- Tool versions are immutable and never deleted: skills are validated against them and pin them.
- A skill version that left the draft state keeps its content: only ``status``,
  ``status_changed_at`` and ``retired_at`` may change (publish, retire, roll back), it never becomes
  a draft again and is never deleted. The row is compared as ``jsonb`` minus those columns, so a
  column added later is covered without touching the trigger. TRUNCATE is refused on both tables.
- One HNSW index (cosine) per supported dimension on ``memory_skill.embedding::vector(d)``, partial
  on that dimension (the mixed-dimension pattern of migration 0002).
- The permissions of the tenant groups: operators edit, publish, retire and roll back skills; compliance officers look at everything (see 0005 for why permissions are created
  here first).
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.db import migrations

from core.sqlrules import ApplySqlRule
from memory.procedural.models import INDEXED_DIMENSIONS

DROP_SKILLVERSION_GUARD = """
DROP TRIGGER IF EXISTS memory_skillversion_no_truncate ON memory_skillversion;
DROP TRIGGER IF EXISTS memory_skillversion_immutable ON memory_skillversion;
DROP FUNCTION IF EXISTS engram_guard_skillversion();
"""
DROP_TOOLVERSION_GUARD = """
DROP TRIGGER IF EXISTS memory_toolversion_no_truncate ON memory_toolversion;
DROP TRIGGER IF EXISTS memory_toolversion_immutable ON memory_toolversion;
DROP FUNCTION IF EXISTS engram_reject_toolversion_mutation();
"""

HNSW = "\n".join(
    f"CREATE INDEX skill_hnsw_{d} ON memory_skill USING hnsw ((embedding::vector({d})) vector_cosine_ops) "
    f"WHERE embedding_dimensions = {d};"
    for d in INDEXED_DIMENSIONS
)
DROP_HNSW = "\n".join(f"DROP INDEX IF EXISTS skill_hnsw_{d};" for d in INDEXED_DIMENSIONS)

VIEW = [
    "memory.view_tool",
    "memory.view_toolversion",
    "memory.view_skill",
    "memory.view_skillversion",
    "memory.view_skillrun",
]
GROUPS = {
    "operator": [
        *VIEW,
        "memory.add_skill",
        "memory.change_skill",
        "memory.add_skillversion",
        "memory.change_skillversion",
        "memory.publish_skillversion",
    ],
    "compliance officer": VIEW,
}


def group_permissions(groups):
    """``(grant, revoke)`` for ``RunPython``: give each group of ``groups`` (name -> permissions as
    ``"app_label.codename"``) its permissions, creating them and the group first; take them away."""

    def grant(apps, schema_editor):
        alias = schema_editor.connection.alias
        ContentType = apps.get_model("contenttypes", "ContentType")
        Group = apps.get_model("auth", "Group")
        Permission = apps.get_model("auth", "Permission")
        ContentType.objects.clear_cache()
        create_permissions(global_apps.get_app_config("memory"), verbosity=0, using=alias, apps=apps)
        for name, perms in groups.items():
            group, _ = Group.objects.using(alias).get_or_create(name=name)
            for perm in perms:
                app_label, codename = perm.split(".")
                group.permissions.add(
                    Permission.objects.using(alias).get(content_type__app_label=app_label, codename=codename)
                )

    def revoke(apps, schema_editor):
        alias = schema_editor.connection.alias
        Group = apps.get_model("auth", "Group")
        Permission = apps.get_model("auth", "Permission")
        for name, perms in groups.items():
            group = Group.objects.using(alias).filter(name=name).first()
            if group is None:
                continue
            for perm in perms:
                app_label, codename = perm.split(".")
                group.permissions.remove(
                    *Permission.objects.using(alias).filter(
                        content_type__app_label=app_label, codename=codename
                    )
                )

    return grant, revoke


grant, revoke = group_permissions(GROUPS)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("memory", "0010_procedural"),
    ]

    operations = [
        ApplySqlRule(
            "engram_reject_toolversion_mutation", "f80b9245125f2178", reverse_sql=DROP_TOOLVERSION_GUARD
        ),
        ApplySqlRule("engram_guard_skillversion", "cc5e2a9c88794784", reverse_sql=DROP_SKILLVERSION_GUARD),
        migrations.RunSQL(HNSW, DROP_HNSW),
        migrations.RunPython(grant, revoke),
    ]
