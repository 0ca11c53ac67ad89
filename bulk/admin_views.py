"""The campaign console's own admin views (wired by ``CampaignAdmin.get_urls``, staff only).

- ``GET /admin/bulk/campaign/progress.json?ids=1,2,3`` and ``GET .../<id>/progress.json``:
  ``{"campaigns": [bulk.live bodies], "missing": [ids not found]}``. Bad ids answer 400 and an
  unknown single id 404, both ``{"error", "detail"}`` (api/errors.py), never 500.
- ``POST .../<id>/act/<action>/`` (pause, resume, cancel, recall, duplicate; CSRF): the same
  services as the list's actions; the operator is sent back to the campaign's page with a message
  that says what happened, that nothing changed, or why the action was refused (naming it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse

from api.errors import Conflict, MissiveError
from bulk import live, services
from bulk.models import Campaign, CampaignStatus
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
class Outcome:
    level: int
    text: str
    campaign_id: int  # the page to go back to (a duplicate's new campaign)


def _status_change(verb: str, run: Callable[[int], Campaign]) -> Callable[[Campaign], Outcome]:
    def act(campaign: Campaign) -> Outcome:
        after = run(campaign.pk).status
        if after == campaign.status:
            text = f"Campaign {campaign.pk} was already {after}: nothing changed."
            return Outcome(messages.INFO, text, campaign.pk)
        return Outcome(messages.SUCCESS, f"{verb} campaign {campaign.pk}.", campaign.pk)

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
    return Outcome(messages.SUCCESS, text, campaign.pk)


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
    )
    text = f"Campaign {campaign.pk} duplicated as campaign {copy.pk} ({copy.status})."
    return Outcome(messages.SUCCESS, text, copy.pk)


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
    messages.add_message(request, outcome.level, outcome.text)
    return HttpResponseRedirect(reverse("admin:bulk_campaign_change", args=[outcome.campaign_id]))
