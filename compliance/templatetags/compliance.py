"""``{% chain_status_panel %}``: the integrity panel of the admin index, for who may see it."""

from __future__ import annotations

from typing import Any

from django import template

from compliance import admin_views

register = template.Library()


@register.inclusion_tag("admin/compliance/_status_panel.html", takes_context=True)
def chain_status_panel(context: dict[str, Any]) -> dict[str, Any]:
    request = context["request"]
    if not request.user.has_perm(admin_views.VIEW_STATUS):
        return {"hidden": True}
    return {**admin_views.status_context(request), "csrf_token": context.get("csrf_token")}
