"""System checks for the admins of both sites (tenant and platform).

``admin_actions_need_permissions``: every admin action names the permissions it needs. Django offers
an action without ``allowed_permissions`` to anyone who may see the changelist, so a view-only
compliance officer could run one that writes (issue 7: minting API keys). Registered for the
``admin`` tag by ``MemoryConfig.ready``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.admin import AdminSite
from django.contrib.admin.sites import all_sites
from django.core import checks

ACTION_WITHOUT_PERMISSIONS = "engram.E001"


def admin_action_permission_errors(sites: Iterable[AdminSite]) -> list[checks.Error]:
    """One ``engram.E001`` error per action of a ModelAdmin registered on ``sites`` whose
    ``allowed_permissions`` is missing or empty (site-wide actions such as ``delete_selected``
    included, as each ModelAdmin offers them)."""
    errors = []
    for site in sites:
        for model_admin in site._registry.values():
            # the actions before the permission filter, as Django's own admin checks list them
            for func, name, _ in model_admin._get_base_actions():  # type: ignore[attr-defined]
                if getattr(func, "allowed_permissions", None):
                    continue
                errors.append(
                    checks.Error(
                        f"The admin action {name!r} of {type(model_admin).__name__} on the "
                        f"{site.name!r} admin site sets no allowed_permissions, so the view "
                        "permission is enough to run it.",
                        hint="Decorate it with @admin.action(permissions=[...]) naming what its "
                        "effect needs (add, change, delete, or a has_<name>_permission method).",
                        obj=type(model_admin),
                        id=ACTION_WITHOUT_PERMISSIONS,
                    )
                )
    return errors


def admin_actions_need_permissions(app_configs: Any = None, **kwargs: Any) -> list[checks.Error]:
    """The ``admin_action_permission_errors`` of every admin site of the process (Django keeps a
    registry of them), so the tenant admin and the platform admin are both covered."""
    return admin_action_permission_errors(all_sites)
