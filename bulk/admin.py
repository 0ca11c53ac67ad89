"""Django admin for operators: campaigns with their live progress, creation and
pause/resume/cancel/recall/duplicate, the batch ledger and audiences (read-only), sender policies
and channel settings (editable).

A campaign is created here from a form (``/admin/bulk/campaign/add/``: bulk/admin_forms.py,
``admin_views.create``) that previews it with the API's dry run and launches it through the API's
create service, as the operator (no API client, like ``manage.py campaign_send``); or through the
API or ``campaign_send``. A campaign's page is read-only: it shows its name, its content's text
with a link to its Message (whose page links back: ``campaign_links``, registered in bulk.apps)
and its actions as buttons; the actions call the same services as the API, reporting what a
campaign's status refused (a finished campaign cannot be resumed) as an error message, and what
changed nothing as such. Every action that changed something, and every creation, is written to the
campaign's History (``adminsite.audit``: Django's LogEntry).

The campaign list and page are a live console: ``bulk/static/bulk/console.js`` polls
``progress.json`` (bulk/admin_views.py, figures from bulk/live.py) every 1.5 s and rewrites the
cells marked ``data-live``, so the page renders the same figures first and then keeps them
current without a reload. The campaign page has its actions as buttons (POST, CSRF).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import Lower
from django.http import HttpRequest
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from adminsite import audit
from adminsite.paging import BigTableAdmin, ReadOnlyAdmin, id_terms
from api.errors import MissiveError
from bulk import admin_views, live, services
from bulk.admin_views import OPERATOR_PAUSE
from bulk.models import (
    Audience,
    Campaign,
    CampaignBatch,
    CampaignStatus,
    ChannelSetting,
    SenderPolicy,
)
from messaging.models import Message


# -- the live figures, as text (console.js writes the same text from progress.json) ----------
def live_body(campaign: Campaign) -> dict[str, Any]:
    """The campaign's live body, computed once per row (a changelist fills a page at once)."""
    body: dict[str, Any] | None = getattr(campaign, "_live", None)
    if body is None:
        body = live.campaigns_live([campaign])[0]
        campaign._live = body  # type: ignore[attr-defined]
    return body


def planning(body: dict[str, Any]) -> bool:
    """The audience is still being planned: ``total`` grows (console.js has the same test)."""
    return not body["planned"] and body["status"] != CampaignStatus.FINISHED


def figures_text(body: dict[str, Any]) -> str:
    """While the audience is still being planned its total grows: a percentage of its estimated
    size with "so far", or, before the estimate, no percentage (console.js says the same)."""
    skipped = body["skipped"]["quota"] + body["skipped"]["blocked"]
    counts = f"{body['delivered']:,} delivered · {skipped:,} skipped · {body['failed']:,} failed"
    if planning(body) and body["estimate"]:
        return (
            f"{body['percent']}% · {counts} of ~{body['expected_total']:,} "
            f"(estimated; {body['total']:,} planned so far)"
        )
    if planning(body):
        return f"{counts} of {body['total']:,} planned so far"
    return f"{body['percent']}% · {counts} of {body['total']:,}"


def bar_value(body: dict[str, Any]) -> SafeString:
    """The bar's value attribute; none (an indeterminate bar) while the total still grows and
    its size is not estimated yet."""
    if planning(body) and not body["estimate"]:
        return SafeString("")
    return format_html('value="{}"', body["percent"])


RATE_MEANS = (
    "Recipients processed (delivered, skipped or failed) per second over the last seconds shown; "
    "the channel's token bucket lets a campaign run briefly above the channel's rate after a "
    "quiet spell (its burst), so this can exceed it for a few seconds."
)


def rate_text(body: dict[str, Any]) -> str:
    rate = body["rate"]
    return "—" if rate is None else f"{rate['per_s']:,.1f}/s over {rate['over_s']:.0f} s"


def eta_text(body: dict[str, Any]) -> str:
    seconds = body["eta_s"]
    if seconds is None:
        return "—"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def status_text(body: dict[str, Any]) -> str:
    reason = f" ({body['pause_reason']})" if body["pause_reason"] else ""
    recalled = " · message recalled" if body["recall"] is not None else ""
    return f"{body['status']}{reason}{recalled}"


def warning_text(body: dict[str, Any]) -> str:
    if not body["no_worker"]:
        return ""
    return f"No worker consumes {body['queue']} ({body['queued'] or 0:,} tasks waiting)"


def recall_text(body: dict[str, Any]) -> str:
    recall = body["recall"]
    if recall is None:
        return ""
    return (
        f"Recalled · {recall['percent']}% ({recall['batches_done']:,} / "
        f"{recall['batches']:,} batches)"
    )


# -- the content's text -----------------------------------------------------------------------
SHORT_TEXT = 60


def content_text(body: Any) -> str:
    """What a message says, as text: a text's text, a card's title and body, an image's URL."""
    if not isinstance(body, dict):
        return ""
    if body.get("type") == "card":
        return " · ".join(str(body.get(k) or "") for k in ("title", "body") if body.get(k))
    if body.get("type") == "image":
        return f"[image] {body.get('url', '')}"
    return str(body.get("text") or "")


def texts_of(campaigns: list[Campaign]) -> dict[int, str]:
    """The text of each campaign's message, by msgkey: one query for a whole page."""
    msgkeys = {c.msgkey for c in campaigns if c.msgkey is not None}
    if not msgkeys:
        return {}
    found = Message.objects.filter(msgkey__in=msgkeys).values_list("msgkey", "body")
    return {msgkey: content_text(body) for msgkey, body in found}


def text_of(campaign: Campaign) -> str:
    text: str | None = getattr(campaign, "_text", None)  # filled for a changelist page
    if text is None:
        text = texts_of([campaign]).get(campaign.msgkey or 0, "")
        campaign._text = text  # type: ignore[attr-defined]
    return text


def shorten(text: str, limit: int = SHORT_TEXT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def campaign_links(message: Message) -> list[tuple[str, str]]:
    """The campaigns that sent ``message`` (its page links back to them)."""
    found = Campaign.objects.filter(msgkey=message.msgkey).order_by("pk")
    return [(str(c), reverse("admin:bulk_campaign_change", args=[c.pk])) for c in found]


def live_span(campaign: Campaign, field: str, text: str, css: str = "") -> SafeString:
    return format_html(
        '<span data-live="{}" data-live-id="{}" class="{}">{}</span>', field, campaign.pk, css, text
    )


CHANGE_ACTIONS = {
    "pause": (CampaignStatus.RUNNING,),
    "resume": (CampaignStatus.PAUSED,),
    "cancel": (
        CampaignStatus.DRAFT,
        CampaignStatus.SCHEDULED,
        CampaignStatus.RUNNING,
        CampaignStatus.PAUSED,
    ),
}


# What the page asks before an action that cannot be undone (console.js shows it).
CONFIRM = {
    "cancel": "Cancel campaign {pk}? A cancelled campaign cannot be resumed.",
    "recall": "Recall campaign {pk}'s message from every recipient? This cannot be undone.",
}


@admin.register(Campaign)
class CampaignAdmin(BigTableAdmin):
    list_display = ("campaign", "sender", "state", "progress", "pace", "created_at")
    list_display_links = ("campaign",)
    list_filter = ("status", "channel")
    search_fields = ("id", "sender_uid")  # enables the box; get_search_results does the search
    id_search_fields = ("id", "sender_uid")
    search_help_text = "A campaign id, a sender uid, or part of a campaign's name."
    ordering = ("-id",)
    actions = (
        "pause_selected",
        "resume_selected",
        "cancel_selected",
        "recall_selected",
        "duplicate_selected",
    )
    change_form_template = "admin/bulk/campaign/change_form.html"
    fieldsets = (
        (None, {"fields": ("name", "sender_uid", "client", "channel", "state")}),
        ("Progress", {"fields": ("progress", "rate", "eta", "totals", "batches_summary")}),
        (
            "Content and audience",
            {"fields": ("content", "message", "audience_type", "audience_spec", "audience")},
        ),
        (
            "Timeline",
            {"fields": ("created_at", "scheduled_at", "started_at", "finished_at", "planned")},
        ),
        ("Idempotency", {"fields": ("idempotency_key", "request_digest")}),
    )

    class Media:
        css = {"all": ("bulk/console.css",)}
        js = ("bulk/console.js",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [str(name) for _, options in self.fieldsets for name in options["fields"]]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The list's actions need "change"; a campaign's own page stays read-only.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # cancel instead: the content and the inbox entries stay

    # -- the console's own views -------------------------------------------------------------
    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        own = [
            path("progress.json", wrap(self._progress_many), name="bulk_campaign_progress"),
            path(
                "<str:object_id>/progress.json",
                wrap(self._progress_one),
                name="bulk_campaign_progress_one",
            ),
            path("<str:object_id>/act/<str:action>/", wrap(self._act), name="bulk_campaign_act"),
        ]
        return own + super().get_urls()

    def _progress_many(self, request: HttpRequest) -> Any:
        if not self.has_view_permission(request):
            return admin_views.error(403, "forbidden", "Viewing campaigns is not permitted.")
        return admin_views.progress_many(request)

    def _progress_one(self, request: HttpRequest, object_id: str) -> Any:
        if not self.has_view_permission(request):
            return admin_views.error(403, "forbidden", "Viewing campaigns is not permitted.")
        return admin_views.progress_one(request, object_id)

    def _act(self, request: HttpRequest, object_id: str, action: str) -> Any:
        if not self.has_change_permission(request):
            return admin_views.error(403, "forbidden", "Changing campaigns is not permitted.")
        return admin_views.act(request, object_id, action)

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> Any:
        if not self.has_add_permission(request):
            raise PermissionDenied
        return admin_views.create(request, self)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Campaign], search_term: str
    ) -> tuple[QuerySet[Campaign], bool]:
        words = search_term.strip()
        if words and id_terms(words) is None:  # not ids: part of a name (campaigns are few)
            named = queryset.annotate(lower_name=Lower("name"))  # the column's collation is _bin
            return named.filter(lower_name__contains=words.lower()), False
        return super().get_search_results(request, queryset, search_term)

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        rows = list(changelist.result_list)  # evaluated once: the rows the columns render
        texts = texts_of(rows)
        for row, body in zip(rows, live.campaigns_live(rows), strict=True):
            row._live = body
            row._text = texts.get(row.msgkey or 0, "")
        return changelist

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        try:
            campaign = Campaign.objects.filter(pk__in=live.parse_ids(object_id)).first()
        except ValueError:  # no id (an add) or not one: Django's own page answers
            campaign = None
        context = {
            **(extra_context or {}),
            "console_buttons": self._buttons(request, campaign),
            "console_warning": warning_text(live_body(campaign)) if campaign else "",
        }
        return super().changeform_view(request, object_id, form_url, context)

    def _buttons(self, request: HttpRequest, campaign: Campaign | None) -> list[dict[str, str]]:
        if campaign is None or not self.has_change_permission(request):
            return []
        shown = [name for name, allowed in CHANGE_ACTIONS.items() if campaign.status in allowed]
        if campaign.msgkey is not None:
            shown += ["recall", "duplicate"]
        return [
            {
                "name": name,
                "label": name.capitalize(),
                "url": reverse("admin:bulk_campaign_act", args=[campaign.pk, name]),
                "confirm": CONFIRM.get(name, "").format(pk=campaign.pk),
            }
            for name in shown
        ]

    # -- columns -----------------------------------------------------------------------------
    @admin.display(description="campaign", ordering="id")
    def campaign(self, campaign: Campaign) -> SafeString:
        """Its id and name, and the start of its text: campaigns told apart at a glance."""
        title = f"{campaign.pk} · {campaign.name}" if campaign.name else str(campaign.pk)
        return format_html(
            '<strong class="campaign-title">{}</strong><br><span class="campaign-text">{}</span>',
            title,
            shorten(text_of(campaign)) or "—",
        )

    @admin.display(description="sender · channel")
    def sender(self, campaign: Campaign) -> SafeString:
        return format_html("{}<br>{}", campaign.sender_uid, campaign.get_channel_display())

    @admin.display(description="text")
    def content(self, campaign: Campaign) -> SafeString:
        return format_html('<div class="campaign-content">{}</div>', text_of(campaign) or "—")

    @admin.display(description="message")
    def message(self, campaign: Campaign) -> SafeString | str:
        if campaign.msgkey is None:
            return "—"
        found = Message.objects.filter(msgkey=campaign.msgkey).first()
        status = f" ({found.get_status_display()})" if found is not None else " (gone)"
        return format_html(
            '<a href="{}">message {}</a>{}',
            reverse("admin:messaging_message_change", args=[campaign.msgkey]),
            campaign.msgkey,
            status,
        )

    @admin.display(description="status", ordering="status")
    def state(self, campaign: Campaign) -> SafeString:
        body = live_body(campaign)
        return format_html(
            "{}<br>{}",
            live_span(campaign, "status", status_text(body)),
            live_span(campaign, "warning", warning_text(body), "live-warning"),
        )

    @admin.display(description="progress")
    def progress(self, campaign: Campaign) -> SafeString:
        body = live_body(campaign)
        skipped = body["skipped"]
        detail = (
            f"skipped: {skipped['quota']:,} quota, {skipped['blocked']:,} blocked; audience lines "
            f"dropped: {skipped['invalid']:,} invalid, {skipped['duplicate']:,} duplicate"
        )
        return format_html(
            '<progress data-live="bar" data-live-id="{}" {} max="100"></progress>'
            '<br><span data-live="figures" data-live-id="{}" title="{}">{}</span>'
            "<br>{}",
            campaign.pk,
            bar_value(body),
            campaign.pk,
            detail,
            figures_text(body),
            live_span(campaign, "recall", recall_text(body), "live-recall"),
        )

    @admin.display(description="recipients/s")
    def rate(self, campaign: Campaign) -> SafeString:
        return format_html(
            '<span title="{}">{}</span>',
            RATE_MEANS,
            live_span(campaign, "rate", rate_text(live_body(campaign))),
        )

    @admin.display(description="eta")
    def eta(self, campaign: Campaign) -> SafeString:
        return live_span(campaign, "eta", eta_text(live_body(campaign)))

    @admin.display(description="rate · eta")
    def pace(self, campaign: Campaign) -> SafeString:
        """The list's rate and ETA in one column (the table fits 1,400 px without scrolling)."""
        return format_html("{}<br>ETA {}", self.rate(campaign), self.eta(campaign))

    @admin.display(description="totals")
    def totals(self, campaign: Campaign) -> SafeString:
        return live_span(
            campaign,
            "totals",
            (
                f"{campaign.delivered:,} delivered, {campaign.failed:,} failed; skipped "
                f"{campaign.skipped_quota:,} quota, {campaign.skipped_blocked:,} blocked, "
                f"{campaign.skipped_invalid:,} invalid, {campaign.skipped_duplicate:,} duplicate"
            ),
        )

    @admin.display(description="batches")
    def batches_summary(self, campaign: Campaign) -> SafeString:
        rows = (
            CampaignBatch.objects.filter(campaign=campaign)
            .values("state")
            .annotate(batches=Count("pk"), recipients=Sum("size"), attempts=Sum("attempts"))
            .order_by("state")
        )
        link = reverse("admin:bulk_campaignbatch_changelist")
        body = format_html_join(
            "",
            '<tr><td><a href="{}?campaign__id__exact={}&amp;state__exact={}">{}</a></td>'
            "<td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    link,
                    campaign.pk,
                    r["state"],
                    r["state"],
                    r["batches"],
                    r["recipients"],
                    r["attempts"],
                )
                for r in rows
            ),
        )
        head = "<tr><th>state</th><th>batches</th><th>recipients</th><th>attempts</th></tr>"
        return format_html("<table>{}{}</table>", SafeString(head), body)

    # -- actions -----------------------------------------------------------------------------
    def _apply(
        self,
        request: HttpRequest,
        queryset: QuerySet[Campaign],
        action: Callable[[int], Campaign],
        done: str,
    ) -> None:
        changed = 0
        for pk, before in queryset.values_list("pk", "status"):
            try:
                after = action(pk)
            except MissiveError as exc:
                self.message_user(request, f"Campaign {pk}: {exc.detail}", messages.ERROR)
                continue
            if after.status == before:  # nothing to do: say so rather than count it as done
                text = f"Campaign {pk} was already {after.status}."
                self.message_user(request, text, messages.INFO)
            else:
                changed += 1
                audit.record(request, after, admin_views.changed_text(done, before))
        if changed:
            self.message_user(request, f"{done} {changed} campaign(s).", messages.SUCCESS)

    @admin.action(description="Pause selected campaigns", permissions=["change"])
    def pause_selected(self, request: HttpRequest, queryset: QuerySet[Campaign]) -> None:
        def pause(pk: int) -> Campaign:
            return services.campaign_pause(campaign_id=pk, reason=OPERATOR_PAUSE)

        self._apply(request, queryset, pause, "Paused")

    @admin.action(description="Resume selected campaigns", permissions=["change"])
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Campaign]) -> None:
        self._apply(
            request, queryset, lambda pk: services.campaign_resume(campaign_id=pk), "Resumed"
        )

    @admin.action(description="Cancel selected campaigns", permissions=["change"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Campaign]) -> None:
        self._apply(
            request, queryset, lambda pk: services.campaign_cancel(campaign_id=pk), "Cancelled"
        )

    @admin.action(description="Recall selected campaigns' messages", permissions=["change"])
    def recall_selected(self, request: HttpRequest, queryset: QuerySet[Campaign]) -> None:
        self._each(request, queryset, "recall")

    @admin.action(description="Duplicate selected campaigns", permissions=["change"])
    def duplicate_selected(self, request: HttpRequest, queryset: QuerySet[Campaign]) -> None:
        self._each(request, queryset, "duplicate")

    def _each(self, request: HttpRequest, queryset: QuerySet[Campaign], action: str) -> None:
        """One of the page's actions on each selected campaign, each saying what it did."""
        for campaign in queryset:
            try:
                outcome = admin_views.ACTIONS[action](campaign)
            except MissiveError as exc:
                text = f"Could not {action} campaign {campaign.pk}: {exc.detail}"
                self.message_user(request, text, messages.ERROR)
                continue
            admin_views.audit_outcome(request, outcome)
            self.message_user(request, outcome.text, outcome.level)


@admin.register(CampaignBatch)
class CampaignBatchAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "campaign_id",
        "index",
        "state",
        "size",
        "delivered",
        "skipped_quota",
        "skipped_blocked",
        "failed",
        "attempts",
        "lease_until",
        "finished_at",
    )
    list_filter = ("state",)
    ordering = ("campaign_id", "index")

    def get_queryset(self, request: HttpRequest) -> QuerySet[CampaignBatch]:
        return super().get_queryset(request).defer("uids")  # 1,000 uids a row: detail only


@admin.register(Audience)
class AudienceAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "name",
        "client",
        "sender_uid",
        "count",
        "invalid_lines",
        "duplicate_lines",
        "created_at",
    )
    list_select_related = ("client",)
    ordering = ("-id",)
    fields = (
        "name",
        "client",
        "sender_uid",
        "count",
        "invalid_lines",
        "duplicate_lines",
        "samples",
        "created_at",
    )
    readonly_fields = fields

    @admin.display(description="invalid samples")
    def samples(self, audience: Audience) -> SafeString:
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li>line {}: <code>{}</code> ({})</li>",
                ((s.get("line"), s.get("text"), s.get("reason")) for s in audience.invalid_samples),
            ),
        )


@admin.register(SenderPolicy)
class SenderPolicyAdmin(BigTableAdmin):
    list_display = (
        "sender_uid",
        "per_receiver_limit",
        "per_receiver_period_s",
        "daily_budget",
        "priority_allowed",
    )
    list_filter = ("priority_allowed",)
    search_fields = ("sender_uid",)
    id_search_fields = ("sender_uid",)
    search_help_text = "A sender uid."


@admin.register(ChannelSetting)
class ChannelSettingAdmin(admin.ModelAdmin):
    list_display = ("channel", "rate_per_s", "batch_size")
