"""The campaign console's own admin views (wired by ``CampaignAdmin.get_urls``, staff only).

- ``GET /admin/bulk/campaign/progress.json?ids=1,2,3`` and ``GET .../<id>/progress.json``:
  ``{"campaigns": [bulk.live bodies], "missing": [ids not found]}``. Bad ids answer 400 and an
  unknown single id 404, both ``{"error", "detail"}`` (api/errors.py), never 500.
- ``POST .../<id>/act/<action>/`` (pause, resume, cancel, recall, duplicate; CSRF): the same
  services as the list's actions; the operator is sent back to the campaign's page with a message
  that says what happened, that nothing changed, or why the action was refused (naming it).
- ``GET/POST .../add/`` (``create``): the creation form (bulk/admin_forms.py). ``_preview`` runs
  the API's dry run (``services.campaign_preview``) and shows the form again, as typed, with the
  figures in ``#dry-run``; ``_launch`` creates through ``services.campaign_submit`` under the
  form's idempotency key (a Redis lock, bulk/keys.py ``admin_launch``, serialises a double
  submit, and the second finds the first's campaign) and opens the new campaign's page. An
  uploaded file is stored (``services.audience_upload``) in the same transaction as the preview
  or the campaign, so a refusal stores nothing; after a preview its id rides in a hidden field.

Audit: every action that changed something is written to the campaign's History
(``adminsite.audit.record``): ``Outcome.log`` lists the entries, ``audit`` writes them. An
action that changed nothing, or was refused, writes none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.contrib.admin import helpers
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from rest_framework.exceptions import ValidationError

from adminsite import audit
from api.errors import Conflict, MissiveError
from bulk import keys, live, selectors, services
from bulk.admin_forms import FIELDSETS, CampaignCreateForm, new_key
from bulk.models import Audience, AudienceType, Campaign, CampaignStatus, Channel
from bulk.serializers import upload_lines
from infra.outages import store_unavailable
from infra.redis import get_redis
from messaging.models import Message, MessageStatus
from messaging.services import message_recall

OPERATOR_PAUSE = "operator"


def error(status: int, code: str, detail: str) -> JsonResponse:
    return JsonResponse({"error": code, "detail": detail}, status=status)


def progress_many(request: HttpRequest) -> JsonResponse:
    try:
        ids = live.parse_ids(request.GET.get("ids"))
    except ValueError as exc:
        return error(400, "invalid", str(exc))
    found = {c.pk: c for c in Campaign.objects.filter(pk__in=ids)}
    shown = [found[pk] for pk in ids if pk in found]
    missing = [str(pk) for pk in ids if pk not in found]
    return JsonResponse({"campaigns": live.campaigns_live(shown), "missing": missing})


def _named(object_id: str) -> Campaign | JsonResponse:
    """The campaign the URL names, or the 400/404 that says why there is none."""
    try:
        (pk,) = live.parse_ids(object_id)
    except ValueError:
        return error(400, "invalid", f"{object_id[:40]!r} is not a campaign id.")
    campaign = Campaign.objects.filter(pk=pk).first()
    return campaign or error(404, "not_found", f"No campaign {pk}.")


def progress_one(request: HttpRequest, object_id: str) -> JsonResponse:
    campaign = _named(object_id)
    if isinstance(campaign, JsonResponse):
        return campaign
    return JsonResponse({"campaigns": live.campaigns_live([campaign]), "missing": []})


# -- actions on one campaign ------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One line of a campaign's History: what an operator did to it."""

    campaign: Campaign
    message: str
    flag: int = audit.CHANGE


@dataclass(frozen=True)
class Outcome:
    level: int
    text: str
    campaign_id: int  # the page to go back to (a duplicate's new campaign)
    log: tuple[Entry, ...] = field(default=())  # empty when nothing changed


def audit_outcome(request: HttpRequest, outcome: Outcome) -> None:
    for entry in outcome.log:
        audit.record(request, entry.campaign, entry.message, entry.flag)


def changed_text(verb: str, before: str) -> str:
    """The History line of a status change: ``Paused (was running).``"""
    return f"{verb} (was {before})."


def _status_change(verb: str, run: Callable[[int], Campaign]) -> Callable[[Campaign], Outcome]:
    def act(campaign: Campaign) -> Outcome:
        after = run(campaign.pk)
        if after.status == campaign.status:
            text = f"Campaign {campaign.pk} was already {after.status}: nothing changed."
            return Outcome(messages.INFO, text, campaign.pk)
        log = (Entry(after, changed_text(verb, campaign.status)),)
        return Outcome(messages.SUCCESS, f"{verb} campaign {campaign.pk}.", campaign.pk, log)

    return act


def _recall(campaign: Campaign) -> Outcome:
    if campaign.msgkey is None:
        raise Conflict("This campaign has no message to recall.")
    message = Message.objects.filter(msgkey=campaign.msgkey).first()
    again = message is not None and message.status == MessageStatus.RECALLED
    message_recall(msgkey=campaign.msgkey, actor_uid=None, operator=True)
    if again:
        text = (
            f"Campaign {campaign.pk}'s message was already recalled; any batch not yet "
            "recalled was enqueued again."
        )
        return Outcome(messages.INFO, text, campaign.pk)
    stopped = campaign.status in (CampaignStatus.RUNNING, CampaignStatus.PAUSED)
    tail = " The campaign was cancelled." if stopped else ""
    text = (
        f"Recalling campaign {campaign.pk}'s message from every recipient "
        f"({campaign.batches_planned:,} batches).{tail}"
    )
    what = f"Recalled its message from every recipient ({campaign.batches_planned:,} batches)."
    log = (Entry(campaign, what + tail),)
    return Outcome(messages.SUCCESS, text, campaign.pk, log)


def _duplicate(campaign: Campaign) -> Outcome:
    message = Message.objects.filter(msgkey=campaign.msgkey or 0).first()
    if message is None:
        raise Conflict("This campaign's message is gone.")
    copy, _ = services.campaign_create(
        sender_uid=campaign.sender_uid,
        content=message.body,
        audience=services.AudienceChoice(
            campaign.audience_type, campaign.audience_spec, campaign.audience
        ),
        channel=campaign.channel,
        name=campaign.name,
    )
    text = f"Campaign {campaign.pk} duplicated as campaign {copy.pk} ({copy.status})."
    log = (
        Entry(campaign, f"Duplicated as campaign {copy.pk}."),
        Entry(copy, f"Created as a duplicate of campaign {campaign.pk}.", audit.ADDITION),
    )
    return Outcome(messages.SUCCESS, text, copy.pk, log)


def _pause(pk: int) -> Campaign:
    return services.campaign_pause(campaign_id=pk, reason=OPERATOR_PAUSE)


def _resume(pk: int) -> Campaign:
    return services.campaign_resume(campaign_id=pk)


def _cancel(pk: int) -> Campaign:
    return services.campaign_cancel(campaign_id=pk)


ACTIONS: dict[str, Callable[[Campaign], Outcome]] = {
    "pause": _status_change("Paused", _pause),
    "resume": _status_change("Resumed", _resume),
    "cancel": _status_change("Cancelled", _cancel),
    "recall": _recall,
    "duplicate": _duplicate,
}


def act(request: HttpRequest, object_id: str, action: str) -> HttpResponse:
    """Run ``action`` on the campaign and go back to a campaign page with what happened."""
    if request.method != "POST":
        return error(405, "method_not_allowed", "Campaign actions are POSTed from its page.")
    run = ACTIONS.get(action)
    if run is None:
        return error(404, "not_found", f"No campaign action {action[:40]!r}.")
    campaign = _named(object_id)
    if isinstance(campaign, JsonResponse):
        return campaign
    try:
        outcome = run(campaign)
    except MissiveError as exc:
        text = f"Could not {action} campaign {campaign.pk}: {exc.detail}"
        outcome = Outcome(messages.ERROR, text, campaign.pk)
    audit_outcome(request, outcome)
    messages.add_message(request, outcome.level, outcome.text)
    return HttpResponseRedirect(reverse("admin:bulk_campaign_change", args=[outcome.campaign_id]))


# -- the creation form (GET/POST .../add/) ------------------------------------------------------
LAUNCH_LOCK_S = 60  # a launch holds its form's key at most this long
LAUNCH_WAIT_S = 10.0  # a second submit of the same form waits this long for the first
UPLOAD_CHUNK_BYTES = 64 * 1024
UNAVAILABLE = (
    "A store Missive depends on did not answer, so nothing was stored or sent. "
    "Try again in a moment."
)
BUSY = (
    "This form is being launched by another submit right now; open the campaign list to see "
    "the campaign it creates."
)


@dataclass(frozen=True)
class Figure:
    key: str  # data-figure="<key>" in the page (what a test or a browser reads)
    label: str
    value: str


def create(request: HttpRequest, model_admin: Any) -> HttpResponse:
    """The creation form: show it, preview (dry run) or launch."""
    figures: list[Figure] | None = None
    if request.method != "POST":
        form = CampaignCreateForm(initial={"idempotency_key": new_key()})
    elif "_launch" in request.POST:
        form = CampaignCreateForm(request.POST, request.FILES)
        launched = _launch(request, form)
        if launched is not None:
            return launched
    else:  # "_preview", or a submit by the Enter key: the safe one
        form = CampaignCreateForm(request.POST, request.FILES)
        figures = _preview(form)
    return _render(request, model_admin, form, figures)


def _preview(form: CampaignCreateForm) -> list[Figure] | None:
    if not form.is_valid():
        return None
    api = form.cleaned_data["api"]
    try:
        with transaction.atomic():  # a refused preview takes its stored file away with it
            spec, stored = _audience_spec(form)
            preview = services.campaign_preview(
                sender_uid=api["sender_uid"],
                audience_spec=spec,
                channel=api["channel"],
                client=None,
            )
    except Exception as exc:  # said on the form, or raised again
        _refused(form, exc)
        return None
    if stored is not None:
        form.keep_audience(stored.pk)
    return dry_run_figures(preview, api["channel"])


def _launch(request: HttpRequest, form: CampaignCreateForm) -> HttpResponse | None:
    """Create the campaign and open its page; None when the form shows why not."""
    if not form.is_valid():
        return None
    key = form.launch_key()
    try:
        with _held(key) as held:
            if not held:
                form.add_error(None, BUSY)
                return None
            earlier = selectors.campaign_for_idempotency_key(None, key)
            if earlier is not None:
                text = f"This form already launched campaign {earlier.pk}: nothing new was created."
                messages.info(request, text)
                return _page_of(earlier)
            with transaction.atomic():
                campaign = _submit(form, key)
                audit.record(request, campaign, created_text(campaign), audit.ADDITION)
    except Exception as exc:  # said on the form, or raised again
        _refused(form, exc)
        return None
    messages.success(request, launched_text(campaign))
    return _page_of(campaign)


def _submit(form: CampaignCreateForm, key: str) -> Campaign:
    api = form.cleaned_data["api"]
    spec, _ = _audience_spec(form)
    campaign, _ = services.campaign_submit(
        sender_uid=api["sender_uid"],
        content=api["content"],
        audience_spec=spec,
        channel=api["channel"],
        scheduled_at=api["scheduled_at"],
        client=None,  # the operator, as manage.py campaign_send: no API client
        idempotency_key=key,
        name=api["name"],
    )
    return campaign


def _audience_spec(form: CampaignCreateForm) -> tuple[dict[str, Any], Audience | None]:
    """The validated audience spec; a chosen file is stored first (parsed as POST /audiences)."""
    upload = form.cleaned_data.get("file")
    if form.cleaned_data["audience_type"] != AudienceType.UPLOAD or upload is None:
        return dict(form.cleaned_data["api"]["audience"]), None
    stored = services.audience_upload(
        lines=upload_lines(upload.chunks(UPLOAD_CHUNK_BYTES)),
        client=None,
        sender_uid=int(form.cleaned_data["api"]["sender_uid"]),
        name=(upload.name or "")[:200],
    )
    return {"type": AudienceType.UPLOAD, "audience_id": stored.pk}, stored


def _refused(form: CampaignCreateForm, exc: Exception) -> None:
    """Say on the form why nothing was created; anything but bad input or an outage is a bug."""
    if isinstance(exc, MissiveError):
        form.add_api_error(exc)
    elif isinstance(exc, ValidationError):
        form.add_validation_error(exc)
    elif store_unavailable(exc):
        form.add_error(None, UNAVAILABLE)
    else:
        raise exc


@contextmanager
def _held(key: str) -> Iterator[bool]:
    """Hold the form's key while it launches (False if another submit kept it LAUNCH_WAIT_S)."""
    redis, name = get_redis(), keys.admin_launch(key)
    deadline = time.monotonic() + LAUNCH_WAIT_S
    while not redis.set(name, "1", nx=True, ex=LAUNCH_LOCK_S):
        if time.monotonic() > deadline:
            yield False
            return
        time.sleep(0.05)
    try:
        yield True
    finally:
        redis.delete(name)  # after the commit: the next submit finds the campaign


def _page_of(campaign: Campaign) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("admin:bulk_campaign_change", args=[campaign.pk]))


def created_text(campaign: Campaign) -> str:
    return (
        f"Created from the admin: {campaign.audience_type} audience on the {campaign.channel} "
        f"channel ({campaign.status})."
    )


def launched_text(campaign: Campaign) -> str:
    if campaign.status == CampaignStatus.SCHEDULED and campaign.scheduled_at is not None:
        when = campaign.scheduled_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"Campaign {campaign.pk} was created and is scheduled to start at {when}."
    return f"Campaign {campaign.pk} was launched on the {campaign.channel} channel."


def dry_run_figures(preview: services.Preview, channel: str) -> list[Figure]:
    if channel != Channel.DAILY:
        budget = "not used on the priority channel"
    elif preview.budget_remaining is None:
        budget = "unlimited"
    else:
        budget = f"{preview.budget_remaining:,} recipients"
    return [
        Figure("audience", "Audience", f"{preview.audience:,} recipients"),
        Figure("blocked", "Would skip: they blocked the sender", f"{preview.would_skip_blocked:,}"),
        Figure("quota", "Would skip: over the per-receiver quota", f"{preview.would_skip_quota:,}"),
        Figure("invalid", "Lines that are not uids", f"{preview.would_skip_invalid:,}"),
        Figure("duplicate", "Duplicate lines", f"{preview.would_skip_duplicate:,}"),
        Figure("would_deliver", "Would deliver", f"{preview.would_deliver:,}"),
        Figure("budget_remaining", "Daily budget left today", budget),
    ]


def _render(
    request: HttpRequest,
    model_admin: Any,
    form: CampaignCreateForm,
    figures: list[Figure] | None,
) -> TemplateResponse:
    value = form["audience_id"].value()
    kept = Audience.objects.filter(pk=value).first() if _is_id(value) else None
    _note_on_file(form, kept, dropped=bool(form.files) and bool(form.errors))
    admin_form: Any = form  # the admin's helpers take any form, though typed for a ModelForm
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Create a campaign",
        "subtitle": None,
        "opts": Campaign._meta,
        "app_label": Campaign._meta.app_label,
        "form": form,
        "adminform": helpers.AdminForm(admin_form, FIELDSETS, {}, model_admin=model_admin),
        "errors": helpers.AdminErrorList(admin_form, []),
        "media": model_admin.media + form.media,
        "add": True,
        "change": False,
        "is_popup": False,
        "has_view_permission": True,
        "has_file_field": True,
        "dry_run": figures,
    }
    return TemplateResponse(request, "admin/bulk/campaign/add_form.html", context)


def _note_on_file(form: CampaignCreateForm, kept: Audience | None, *, dropped: bool) -> None:
    """Under the file input: the file a preview stored (Launch uses it), or that a refused
    submit stored nothing (a browser does not send a file twice)."""
    if kept is not None:
        note = format_html(
            "<strong>Using audience {} ({}: {} uids; {} invalid and {} duplicate lines), stored by "
            "the preview.</strong> Choose another file to replace it.",
            kept.pk,
            kept.name or "upload",
            f"{kept.count:,}",
            f"{kept.invalid_lines:,}",
            f"{kept.duplicate_lines:,}",
        )
    elif dropped:
        note = format_html("<strong>{}</strong>", "Nothing was stored: choose the file again.")
    else:
        return
    field = form.fields["file"]
    field.help_text = format_html("{}<br>{}", field.help_text, note)
    form["file"].help_text = field.help_text  # the bound field copied it when the form cleaned


def _is_id(value: Any) -> bool:
    text = str(value or "")
    return text.isascii() and text.isdigit() and 0 < int(text) < 1 << 63
