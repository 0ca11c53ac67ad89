"""Django admin for operators: campaigns with their live progress and pause/resume/cancel, the batch
ledger and audiences (read-only), sender policies and channel settings (editable).

Campaigns are created through the API or ``manage.py campaign_send``, never typed in here: their
pages are read-only, and the actions call the same services as the API, reporting what a
campaign's status refused (a finished campaign cannot be resumed) as an error message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet, Sum
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from api.errors import MissiveError
from api.paging import BigTableAdmin, BoundedCountPaginator
from bulk import selectors, services
from bulk.models import (
    Audience,
    Campaign,
    CampaignBatch,
    CampaignStatus,
    ChannelSetting,
    SenderPolicy,
)
from config.dbrouter import ReplicaChangelistMixin

OPERATOR_PAUSE = "operator"


class ReadOnlyAdmin(ReplicaChangelistMixin):
    """View-only pages: rows are written by services, never typed in (changelists read the
    replica)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def percent(part: int, whole: int) -> int:
    return min(100, round(100 * part / whole)) if whole else 0


@admin.register(Campaign)
class CampaignAdmin(BigTableAdmin):
    list_display = (
        "id",
        "sender_uid",
        "channel",
        "status",
        "progress",
        "rate",
        "eta",
        "pause_reason",
        "created_at",
    )
    list_filter = ("status", "channel")
    search_fields = ("id", "sender_uid")  # enables the box; BigTableAdmin does the search
    id_search_fields = ("id", "sender_uid")
    search_help_text = "A campaign id or a sender uid."
    ordering = ("-id",)
    actions = ("pause_selected", "resume_selected", "cancel_selected")
    fieldsets = (
        (None, {"fields": ("sender_uid", "client", "channel", "status", "pause_reason")}),
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

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [str(name) for _, options in self.fieldsets for name in options["fields"]]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # through the API or `manage.py campaign_send`

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The list's actions need "change"; a campaign's own page stays read-only.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # cancel instead: the content and the inbox entries stay

    # -- columns -----------------------------------------------------------------------------
    @admin.display(description="progress")
    def progress(self, campaign: Campaign) -> SafeString:
        done = percent(campaign.processed, campaign.total)
        if campaign.status == CampaignStatus.FINISHED:
            done = 100
        return format_html(
            '<progress value="{}" max="100" style="width:7em"></progress> {}% · {} / {} delivered',
            done,
            done,
            campaign.delivered,
            campaign.total,
        )

    @admin.display(description="rate")
    def rate(self, campaign: Campaign) -> str:
        return f"{selectors.campaign_progress(campaign)['rate_per_s']:,.1f}/s"

    @admin.display(description="eta")
    def eta(self, campaign: Campaign) -> str:
        seconds = selectors.campaign_progress(campaign)["eta_s"]
        return "—" if seconds is None else f"{seconds:,.0f} s"

    @admin.display(description="totals")
    def totals(self, campaign: Campaign) -> str:
        return (
            f"{campaign.delivered} delivered, {campaign.failed} failed; skipped "
            f"{campaign.skipped_quota} quota, {campaign.skipped_blocked} blocked, "
            f"{campaign.skipped_invalid} invalid, {campaign.skipped_duplicate} duplicate"
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
