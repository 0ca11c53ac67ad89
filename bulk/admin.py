"""Django admin for operators: campaigns with their live progress and pause/resume/cancel/recall,
the batch ledger and audiences (read-only), sender policies and channel settings (editable).

Campaigns are created through the API or ``manage.py campaign_send``, never typed in here: their
pages are read-only, and the actions call the same services as the API, reporting what a
campaign's status refused (a finished campaign cannot be resumed) as an error message.

The campaign list and page are a live console: ``bulk/static/bulk/console.js`` polls
``progress.json`` (bulk/admin_views.py, figures from bulk/live.py) every 1.5 s and rewrites the
cells marked ``data-live``, so the page renders the same figures first and then keeps them
current without a reload. The campaign page has its actions as buttons (POST, CSRF).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet, Sum
from django.http import HttpRequest
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from api.errors import MissiveError
from api.paging import BigTableAdmin, BoundedCountPaginator
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
from config.dbrouter import ReplicaChangelistMixin


class ReadOnlyAdmin(ReplicaChangelistMixin):
    """View-only pages: rows are written by services, never typed in (changelists read the
    replica)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# -- the live figures, as text (console.js writes the same text from progress.json) ----------
def live_body(campaign: Campaign) -> dict[str, Any]:
    """The campaign's live body, computed once per row (a changelist fills a page at once)."""
    body: dict[str, Any] | None = getattr(campaign, "_live", None)
    if body is None:
        body = live.campaigns_live([campaign])[0]
        campaign._live = body  # type: ignore[attr-defined]
    return body


def figures_text(body: dict[str, Any]) -> str:
    skipped = body["skipped"]["quota"] + body["skipped"]["blocked"]
    return (
        f"{body['percent']}% · {body['delivered']:,} delivered · {skipped:,} skipped · "
        f"{body['failed']:,} failed of {body['total']:,}"
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
    return f"{body['status']}{reason}"


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
    list_display = ("id", "sender_uid", "channel", "state", "progress", "rate", "eta", "created_at")
    list_filter = ("status", "channel")
    search_fields = ("id", "sender_uid")  # enables the box; BigTableAdmin does the search
    id_search_fields = ("id", "sender_uid")
    search_help_text = "A campaign id or a sender uid."
    ordering = ("-id",)
    actions = ("pause_selected", "resume_selected", "cancel_selected", "recall_selected")
    change_form_template = "admin/bulk/campaign/change_form.html"
    fieldsets = (
        (None, {"fields": ("sender_uid", "client", "channel", "state")}),
        ("Progress", {"fields": ("progress", "rate", "eta", "totals", "batches_summary")}),
        (
            "Content and audience",
            {"fields": ("msgkey", "audience_type", "audience_spec", "audience")},
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # through the API or `manage.py campaign_send`

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

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        rows = list(changelist.result_list)  # evaluated once: the rows the columns render
        for row, body in zip(rows, live.campaigns_live(rows), strict=True):
            row._live = body
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
            '<progress data-live="bar" data-live-id="{}" value="{}" max="100"></progress>'
            '<br><span data-live="figures" data-live-id="{}" title="{}">{}</span>'
            "<br>{}",
            campaign.pk,
            body["percent"],
            campaign.pk,
            detail,
            figures_text(body),
            live_span(campaign, "recall", recall_text(body), "live-recall"),
        )

    @admin.display(description="recipients/s")
    def rate(self, campaign: Campaign) -> SafeString:
        return live_span(campaign, "rate", rate_text(live_body(campaign)))

    @admin.display(description="eta")
    def eta(self, campaign: Campaign) -> SafeString:
        return live_span(campaign, "eta", eta_text(live_body(campaign)))

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
                after = action(pk).status
            except MissiveError as exc:
                self.message_user(request, f"Campaign {pk}: {exc.detail}", messages.ERROR)
                continue
            if after == before:  # nothing to do: say so rather than count it as done
                self.message_user(request, f"Campaign {pk} was already {after}.", messages.INFO)
            else:
                changed += 1
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
        for campaign in queryset:
            try:
                outcome = admin_views.ACTIONS["recall"](campaign)
            except MissiveError as exc:
                text = f"Could not recall campaign {campaign.pk}: {exc.detail}"
                self.message_user(request, text, messages.ERROR)
                continue
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
    paginator = BoundedCountPaginator
    show_full_result_count = False

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
