"""The skill editor and its neighbours in the tenant admin (mounted by ``SkillAdmin.get_urls``).

- ``version_view``: a version's page. A draft, for someone with ``change_skillversion``, is a
  structured form: steps as fieldsets (tool, params as JSON, when, on_error, retries, output_as),
  added, removed and moved by the server (``op`` = ``add``, ``remove:<i>``, ``up:<i>``,
  ``down:<i>``), checked by the compiler as you type (``op=validate``: htmx swaps only the error
  lists, out of band, so typing keeps its focus) and saved with ``op=save`` under the draft's
  revision (a stale one answers 409 with the editor and a message). Everyone else, and every
  version that is not a draft, gets the same page without any control.
- ``publish_view`` (publish, or roll back to a version published before), ``retire_view`` (retire
  the published version, or reject a draft) and ``draft_view`` (a new draft from a version):
  plain form posts that redirect back with a message; they need ``publish_skillversion`` or
  ``add_skillversion``.
- ``diff_view``: two versions side by side, step by step.
- ``proposals_view``: the queue of drafts agents proposed, each with its diff and compile result.

Permissions are checked before anything is looked up, so someone who may not act learns nothing of
the skill from a refusal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect, QueryDict
from django.template.response import TemplateResponse
from django.urls import reverse
from django_htmx.http import HttpResponseClientRedirect

from core.admin import HtmxHttpRequest
from core.errors import DomainError, NotFound

from . import selectors
from .diff import version_diff
from .models import Skill, SkillVersion, VersionStatus
from .services.common import Actor
from .services.tools import version_compile
from .services.versions import draft_create, draft_save, version_publish, version_retire
from .validation import ON_ERROR_KEYWORDS, Compiled, Problem

if TYPE_CHECKING:
    from .admin import SkillAdmin

VIEW_PERMISSION = "memory.view_skillversion"
EDIT_PERMISSION = "memory.change_skillversion"
DRAFT_PERMISSION = "memory.add_skillversion"
PUBLISH_PERMISSION = "memory.publish_skillversion"
MAX_EDITOR_STEPS = 200
OPS = ("validate", "save", "add")


def _can(request: HtmxHttpRequest, permission: str) -> bool:
    return bool(request.user.has_perm(permission))


def _may_view(request: HtmxHttpRequest) -> bool:
    return _can(request, VIEW_PERMISSION) or _can(request, EDIT_PERMISSION)


def _version_or_404(skill_id: int, number: int) -> SkillVersion:
    try:
        return selectors.skill_version_by_id(skill_id, number)
    except NotFound as exc:
        raise Http404(exc.message) from exc


def _version_url(version: SkillVersion) -> str:
    return reverse("admin:memory_skill_version", args=[version.skill_id, version.number])


def _stats(version: SkillVersion) -> tuple[int, int]:
    try:
        return version.stats.runs, version.stats.successes
    except ObjectDoesNotExist:
        return 0, 0


@dataclass
class VersionRow:
    """A version in the skill's versions table."""

    version: SkillVersion
    url: str
    runs: int
    successes: int

    @property
    def success_rate(self) -> str:
        return f"{100 * self.successes / self.runs:.0f}% of {self.runs}" if self.runs else "no runs"


def version_rows(skill: Skill) -> list[VersionRow]:
    """Every version of ``skill``, newest first, with its page and run counters."""
    rows = []
    for version in selectors.skill_versions(skill):
        runs, successes = _stats(version)
        rows.append(VersionRow(version, _version_url(version), runs, successes))
    return rows


# --- the editor's form ----------------------------------------------------------------------------------


@dataclass
class StepForm:
    """One step as the editor shows it: the raw field texts, and the problems found for it."""

    index: int
    id: str = ""
    tool: str = ""
    params: str = "{}"
    when: str = ""
    on_error: str = ""
    retries: str = ""
    output_as: str = ""
    problems: list[Problem] = field(default_factory=list)

    @property
    def number(self) -> int:
        return self.index + 1

    @property
    def rows(self) -> int:
        """Lines for the params box: all of them, between 3 and 16."""
        return min(max(self.params.count("\n") + 1, 3), 16)


@dataclass
class EditorState:
    """The editor's content: what is shown, what it parses to, and the compiler's verdict."""

    steps: list[StepForm]
    input_schema: str
    change_note: str
    revision: int
    parsed_steps: list[Any] | None = None
    parsed_input: Any = None
    compiled: Compiled | None = None
    form_problems: list[Problem] = field(default_factory=list)  # JSON that does not parse

    @property
    def input_problems(self) -> list[Problem]:
        found = [p for p in self.form_problems if p.index is None]
        if self.compiled is not None:
            found += [p for p in self.compiled.problems if p.index is None]
        return found

    @property
    def problem_count(self) -> int:
        return len(self.form_problems) + (len(self.compiled.problems) if self.compiled else 0)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def state_from_version(version: SkillVersion) -> EditorState:
    """The editor's state for a saved version."""
    steps = []
    for index, step in enumerate(version.steps if isinstance(version.steps, list) else []):
        raw = step if isinstance(step, dict) else {}
        steps.append(
            StepForm(
                index=index,
                id=str(raw.get("id", "")),
                tool=str(raw.get("tool", "")),
                params=_pretty(raw.get("params", {})),
                when=str(raw.get("when", "")),
                on_error=str(raw.get("on_error", "")),
                retries="" if raw.get("retries") is None else str(raw.get("retries")),
                output_as=str(raw.get("output_as", "")),
            )
        )
    state = EditorState(steps, _pretty(version.input_schema), version.change_note, version.revision)
    state.parsed_steps, state.parsed_input = version.steps, version.input_schema
    return state


def state_from_post(data: QueryDict) -> EditorState:
    """The editor's state from a posted form (``step-<i>-<field>`` for ``i < step_count``)."""
    try:
        count = min(max(int(data.get("step_count", "0")), 0), MAX_EDITOR_STEPS)
    except ValueError:
        count = 0
    try:
        revision = int(data.get("revision", "0"))
    except ValueError:
        revision = 0

    def text(i: int, name: str) -> str:
        return str(data.get(f"step-{i}-{name}", ""))

    steps = [
        StepForm(
            index=i,
            id=text(i, "id"),
            tool=text(i, "tool"),
            params=text(i, "params"),
            when=text(i, "when"),
            on_error=text(i, "on_error"),
            retries=text(i, "retries"),
            output_as=text(i, "output_as"),
        )
        for i in range(count)
    ]
    return EditorState(steps, data.get("input_schema", ""), data.get("change_note", ""), revision)


def _parse(state: EditorState) -> None:
    """Turn the form's texts into steps and an input schema; JSON that does not parse is a problem
    of its step (the compiler then sees the rest)."""
    problems: list[Problem] = []
    try:
        parsed_input = json.loads(state.input_schema) if state.input_schema.strip() else {}
    except json.JSONDecodeError as exc:
        problems.append(
            Problem("input_schema", f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).")
        )
        parsed_input = None
    steps: list[Any] = []
    for form in state.steps:
        step: dict[str, Any] = {"id": form.id.strip(), "tool": form.tool.strip()}
        try:
            step["params"] = json.loads(form.params) if form.params.strip() else {}
        except json.JSONDecodeError as exc:
            problems.append(
                Problem(
                    f"steps[{form.index}].params",
                    f"params is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).",
                    form.id or None,
                    form.index,
                )
            )
            step["params"] = {}
        if form.when.strip():
            step["when"] = form.when.strip()
        if form.on_error.strip():
            step["on_error"] = form.on_error.strip()
        if form.retries.strip():
            try:
                step["retries"] = int(form.retries)
            except ValueError:
                step["retries"] = form.retries.strip()  # the compiler names it
        if form.output_as.strip():
            step["output_as"] = form.output_as.strip()
        steps.append(step)
    state.form_problems, state.parsed_steps, state.parsed_input = problems, steps, parsed_input


def _compile(state: EditorState, version: SkillVersion) -> None:
    if state.parsed_steps is None:
        _parse(state)
    pins = version.tool_versions if not version.is_draft else None
    state.compiled = version_compile(
        steps=state.parsed_steps,
        input_schema=state.parsed_input if state.parsed_input is not None else {},
        pins=pins,
    )
    by_step = state.compiled.by_step()
    for form in state.steps:
        form.problems = [p for p in state.form_problems if p.index == form.index] + by_step.get(
            form.index, []
        )


def _apply_op(state: EditorState, op: str) -> None:
    """Add a step at the end, or remove / move the step ``op`` names (``remove:2``, ``up:2``)."""
    if op == "add":
        taken = {s.id for s in state.steps}
        n = len(state.steps) + 1
        while f"step_{n}" in taken:
            n += 1
        state.steps.append(StepForm(index=len(state.steps), id=f"step_{n}"))
    else:
        kind, _, position = op.partition(":")
        try:
            i = int(position)
        except ValueError:
            return
        if not 0 <= i < len(state.steps):
            return
        if kind == "remove":
            state.steps.pop(i)
        elif kind == "up" and i > 0:
            state.steps[i - 1], state.steps[i] = state.steps[i], state.steps[i - 1]
        elif kind == "down" and i < len(state.steps) - 1:
            state.steps[i + 1], state.steps[i] = state.steps[i], state.steps[i + 1]
    for index, form in enumerate(state.steps):
        form.index = index
    state.parsed_steps = None


def _context(
    model_admin: SkillAdmin, request: HtmxHttpRequest, version: SkillVersion, state: EditorState, **extra: Any
) -> dict[str, Any]:
    skill = version.skill
    can_edit = version.is_draft and _can(request, EDIT_PERMISSION)
    others = [v for v in selectors.skill_versions(skill) if v.pk != version.pk]
    published = next((v for v in others if v.status == VersionStatus.PUBLISHED), None)
    runs, successes = _stats(version)
    base = next((v for v in others if v.number == version.based_on), None) if version.based_on else None
    compare_to = base or published
    tools = selectors.tools_for_editor()
    return {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": f"{skill.name} v{version.number} ({version.status})",
        "skill": skill,
        "version": version,
        "state": state,
        "can_edit": can_edit,
        "can_publish": _can(request, PUBLISH_PERMISSION),
        "can_draft": _can(request, DRAFT_PERMISSION),
        "published": published,
        "others": others,
        "compare_to": compare_to,
        "tools": tools,
        "tool_names": {t.name for t in tools},
        "on_error_keywords": ON_ERROR_KEYWORDS,
        "runs": runs,
        "success_rate": f"{100 * successes / runs:.0f}%" if runs else None,
        "edit_url": _version_url(version),
        "saved": False,
        "error": "",
        **extra,
    }


def version_view(
    model_admin: SkillAdmin, request: HtmxHttpRequest, skill_id: int, number: int
) -> HttpResponse:
    """GET: the version's page. POST (drafts, ``change_skillversion``): an editor operation."""
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    if request.method == "POST":
        if not _can(request, EDIT_PERMISSION):
            raise PermissionDenied
    elif not _may_view(request):
        raise PermissionDenied
    version = _version_or_404(skill_id, number)
    if request.method != "POST":
        state = state_from_version(version)
        _compile(state, version)
        return TemplateResponse(
            request, "admin/memory/skill/version.html", _context(model_admin, request, version, state)
        )
    if not version.is_draft:
        messages.error(request, f"v{number} is {version.status}: only drafts can be edited.")
        return _redirect(request, _version_url(version))
    state = state_from_post(request.POST)
    op = request.POST.get("op", "validate")
    if op not in OPS and op.partition(":")[0] not in ("remove", "up", "down"):
        op = "validate"
    if op not in ("validate", "save"):
        _apply_op(state, op)
    _parse(state)
    if op == "validate" and request.htmx:
        _compile(state, version)
        context = _context(model_admin, request, version, state, dirty=_dirty(state, version))
        return TemplateResponse(request, "admin/memory/skill/_validation_oob.html", context)
    status, extra = 200, cast(dict[str, Any], {})
    if op == "save":
        if state.form_problems:
            status, extra = 400, {"error": "Fix the JSON marked below; nothing was saved."}
        else:
            try:
                saved, _ = draft_save(
                    actor=Actor(username=request.user.get_username()),
                    name=version.skill.name,
                    number=version.number,
                    revision=state.revision,
                    steps=state.parsed_steps,
                    input_schema=state.parsed_input,
                    change_note=state.change_note,
                )
            except DomainError as error:
                status, extra = error.status, {"error": error.message}
                if error.status == 409:
                    extra["stale"] = True
            else:
                version = saved
                state.revision = saved.revision
                extra = {"saved": True}
    else:
        extra = {"dirty": _dirty(state, version)}
    _compile(state, version)
    template = "admin/memory/skill/_editor.html" if request.htmx else "admin/memory/skill/version.html"
    return TemplateResponse(
        request, template, _context(model_admin, request, version, state, **extra), status=status
    )


def _dirty(state: EditorState, version: SkillVersion) -> bool:
    """The form differs from the saved draft (what a publish would publish)."""
    return (
        bool(state.form_problems)
        or state.revision != version.revision
        or state.parsed_steps != version.steps
        or state.parsed_input != version.input_schema
        or state.change_note != version.change_note
    )


def _redirect(request: HtmxHttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else HttpResponseRedirect(url)


def _back(request: HtmxHttpRequest, fallback: str) -> str:
    target = request.POST.get("next", "")
    return target if target.startswith("/admin/") and "//" not in target else fallback


def _expected(request: HtmxHttpRequest) -> int | None:
    value = request.POST.get("expected_published", "")
    return int(value) if value.isdigit() else None


def publish_view(
    model_admin: SkillAdmin, request: HtmxHttpRequest, skill_id: int, number: int
) -> HttpResponse:
    """POST: publish version ``number`` (a draft that compiles), or roll back to it (a version
    published before); ``expected_published`` is the version the operator saw published."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not _can(request, PUBLISH_PERMISSION):
        raise PermissionDenied
    version = _version_or_404(skill_id, number)
    rollback = version.status == VersionStatus.RETIRED
    try:
        version_publish(
            username=request.user.get_username(),
            name=version.skill.name,
            number=number,
            expected_published=_expected(request),
        )
    except DomainError as error:
        problems = error.extra.get("problems")
        detail = (
            f" ({len(problems)} problems: see the editor)" if isinstance(problems, list) and problems else ""
        )
        messages.error(request, f"{version.skill.name} v{number} was not published: {error.message}{detail}")
    else:
        verb = "Rolled back" if rollback else "Published"
        messages.success(
            request,
            f"{verb} {version.skill.name} to v{number}."
            if rollback
            else f"{verb} {version.skill.name} v{number}.",
        )
    return _redirect(request, _back(request, _version_url(version)))


def retire_view(
    model_admin: SkillAdmin, request: HtmxHttpRequest, skill_id: int, number: int
) -> HttpResponse:
    """POST: retire the published version ``number``, or reject the draft ``number``."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not _can(request, PUBLISH_PERMISSION):
        raise PermissionDenied
    version = _version_or_404(skill_id, number)
    was_draft = version.is_draft
    try:
        version_retire(
            username=request.user.get_username(),
            name=version.skill.name,
            number=number,
            reason=request.POST.get("reason", "").strip(),
        )
    except DomainError as error:
        messages.error(request, f"{version.skill.name} v{number}: {error.message}")
    else:
        messages.success(request, f"{'Rejected' if was_draft else 'Retired'} {version.skill.name} v{number}.")
    return _redirect(request, _back(request, _version_url(version)))


def draft_view(model_admin: SkillAdmin, request: HtmxHttpRequest, skill_id: int, number: int) -> HttpResponse:
    """POST: a new draft copying version ``number``; redirects to its editor."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not _can(request, DRAFT_PERMISSION):
        raise PermissionDenied
    version = _version_or_404(skill_id, number)
    try:
        draft = draft_create(
            actor=Actor(username=request.user.get_username()),
            name=version.skill.name,
            from_number=number,
        )
    except DomainError as error:
        messages.error(request, f"{version.skill.name}: {error.message}")
        return _redirect(request, _version_url(version))
    messages.success(request, f"Started draft v{draft.number} of {version.skill.name} from v{number}.")
    return _redirect(request, _version_url(draft))


def diff_view(model_admin: SkillAdmin, request: HtmxHttpRequest, skill_id: int) -> HttpResponse:
    """GET ``?a=<n>&b=<m>``: versions ``a`` (left) and ``b`` (right) side by side, step by step
    (defaults: the published version, or the one before, against the newest)."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    if not _may_view(request):
        raise PermissionDenied
    skill = Skill.objects.defer("embedding", "search").filter(pk=skill_id).first()
    if skill is None:
        raise Http404("No such skill.")
    versions = selectors.skill_versions(skill)
    if not versions:
        raise Http404("The skill has no versions.")
    by_number = {v.number: v for v in versions}

    def pick(name: str, default: SkillVersion) -> SkillVersion:
        value = request.GET.get(name, "")
        return by_number.get(int(value), default) if value.isdigit() else default

    newest = versions[0]
    published = next((v for v in versions if v.status == VersionStatus.PUBLISHED), None)
    default_left = (
        published
        if published and published.pk != newest.pk
        else (versions[1] if len(versions) > 1 else newest)
    )
    right = pick("b", newest)
    left = pick("a", default_left)
    diff = version_diff(
        old_steps=left.steps,
        new_steps=right.steps,
        old_input_schema=left.input_schema,
        new_input_schema=right.input_schema,
    )
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": f"{skill.name}: v{left.number} → v{right.number}",
        "skill": skill,
        "left": left,
        "right": right,
        "diff": diff,
        "versions": versions,
        "old_schema": _pretty(left.input_schema),
        "new_schema": _pretty(right.input_schema),
    }
    return TemplateResponse(request, "admin/memory/skill/diff.html", context)


@dataclass
class Proposal:
    """A draft an agent proposed, with its diff against what it was based on and its compile result."""

    version: SkillVersion
    base: SkillVersion | None
    published: SkillVersion | None
    size: int
    counts: dict[str, int]
    problems: list[Problem]
    url: str
    diff_url: str


def proposals_view(model_admin: SkillAdmin, request: HtmxHttpRequest) -> HttpResponse:
    """GET: the drafts agents proposed, oldest first, each with its diff size and compile verdict."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    if not _may_view(request):
        raise PermissionDenied
    items = []
    for version in selectors.proposals_open():
        siblings = {v.number: v for v in selectors.skill_versions(version.skill)}
        published = next((v for v in siblings.values() if v.status == VersionStatus.PUBLISHED), None)
        base = siblings.get(version.based_on) if version.based_on else None
        diff = version_diff(
            old_steps=base.steps if base else [],
            new_steps=version.steps,
            old_input_schema=base.input_schema if base else None,
            new_input_schema=version.input_schema,
        )
        compiled = version_compile(steps=version.steps, input_schema=version.input_schema)
        diff_url = reverse("admin:memory_skill_diff", args=[version.skill_id])
        if base:
            diff_url += f"?a={base.number}&b={version.number}"
        items.append(
            Proposal(
                version,
                base,
                published,
                diff.size,
                diff.counts,
                compiled.problems,
                _version_url(version),
                diff_url,
            )
        )
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": "Skill proposals from agents",
        "items": items,
        "can_publish": _can(request, PUBLISH_PERMISSION),
        "queue_url": reverse("admin:memory_skill_proposals"),
    }
    return TemplateResponse(request, "admin/memory/skill/proposals.html", context)
