"""Django admin of group chat: groups (member counts, dissolve, mute/unmute) and their members
(paged without a full count, searched by exact gid or uid through an index; make admin / member).
Imported by ``messaging.admin``. Messages are recalled through the API, not edited here."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from api.paging import BigTableAdmin
from messaging.groups import services
from messaging.groups.models import Group, GroupMember, GroupRole


@admin.register(Group)
class GroupAdmin(BigTableAdmin):
    list_display = ("gid", "name", "owner_uid", "member_count", "max_seq", "muted", "dissolved_at")
    list_filter = ("muted",)
    search_fields = ("gid", "owner_uid")
    id_search_fields = ("gid", "owner_uid")
    search_help_text = "A gid or an owner uid."
    ordering = ("-gid",)
    readonly_fields = (
        "gid",
        "owner_uid",
        "member_count",
        "max_seq",
        "history_for_new_members",
        "muted",
        "created_at",
        "dissolved_at",
    )
    fields = ("name", *readonly_fields)
    actions = ("dissolve_selected", "mute_selected", "unmute_selected")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # groups are created through the API

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # dissolve instead: members' lists and heads are cleaned up with it

    @admin.action(description="Dissolve selected groups", permissions=["change"])
    def dissolve_selected(self, request: HttpRequest, queryset: QuerySet[Group]) -> None:
        live = list(queryset.filter(dissolved_at__isnull=True).values_list("gid", flat=True))
        for gid in live:
            services.group_dissolve(gid=gid)
        self.message_user(request, f"Dissolved {len(live)} group(s).", messages.SUCCESS)

    @admin.action(description="Mute (only owner and admins send)", permissions=["change"])
    def mute_selected(self, request: HttpRequest, queryset: QuerySet[Group]) -> None:
        count = services.groups_mute(gids=queryset.values_list("gid", flat=True), muted=True)
        self.message_user(request, f"Muted {count} group(s).", messages.SUCCESS)

    @admin.action(description="Unmute", permissions=["change"])
    def unmute_selected(self, request: HttpRequest, queryset: QuerySet[Group]) -> None:
        count = services.groups_mute(gids=queryset.values_list("gid", flat=True), muted=False)
        self.message_user(request, f"Unmuted {count} group(s).", messages.SUCCESS)


@admin.register(GroupMember)
class GroupMemberAdmin(BigTableAdmin):
    list_display = ("gid", "uid", "role", "joined_seq", "read_seq", "left_seq", "muted")
    list_filter = ("role",)
    search_fields = ("gid", "uid")
    id_search_fields = ("gid", "uid")
    search_help_text = "A gid (its members) or a uid (their groups)."
    ordering = ("gid", "uid")
    readonly_fields = ("gid", "uid", "role", "joined_seq", "read_seq", "left_seq", "joined_at")
    actions = ("make_admin", "make_member")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # members join through the API (limits, positions)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # removing a member goes through the API (their position is kept)

    @admin.action(description="Make admin", permissions=["change"])
    def make_admin(self, request: HttpRequest, queryset: QuerySet[GroupMember]) -> None:
        count = queryset.filter(role=GroupRole.MEMBER).update(role=GroupRole.ADMIN)
        self.message_user(request, f"{count} member(s) made admin.", messages.SUCCESS)

    @admin.action(description="Make ordinary member", permissions=["change"])
    def make_member(self, request: HttpRequest, queryset: QuerySet[GroupMember]) -> None:
        count = queryset.filter(role=GroupRole.ADMIN).update(role=GroupRole.MEMBER)
        self.message_user(request, f"{count} admin(s) made ordinary member.", messages.SUCCESS)
