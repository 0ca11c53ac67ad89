"""Django admin of group chat: groups (member counts, dissolve, mute/unmute) and their members
(paged without a full count, searched by exact gid or uid through an index; make admin / member).
Imported by ``messaging.admin``. Messages are recalled through the API, not edited here. Every
action that changes a group or a member is logged in the audit log (``adminsite.audit``), once per
object it changed; an action that changed nothing says so and logs nothing."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from adminsite import audit
from adminsite.paging import BigTableAdmin
from groups import services
from groups.models import Group, GroupMember, GroupRole


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
        live = list(queryset.filter(dissolved_at__isnull=True))
        for group in live:
            services.group_dissolve(gid=group.gid)
            audit.record(request, group, "Dissolved: every member left it.")
        self._report(request, "Dissolve", "Dissolved", len(live), "were already dissolved")

    @admin.action(description="Mute (only owner and admins send)", permissions=["change"])
    def mute_selected(self, request: HttpRequest, queryset: QuerySet[Group]) -> None:
        self._mute(request, queryset, muted=True)

    @admin.action(description="Unmute", permissions=["change"])
    def unmute_selected(self, request: HttpRequest, queryset: QuerySet[Group]) -> None:
        self._mute(request, queryset, muted=False)

    def _mute(self, request: HttpRequest, queryset: QuerySet[Group], *, muted: bool) -> None:
        changing = list(queryset.exclude(muted=muted))
        count = services.groups_mute(gids=[g.gid for g in changing], muted=muted)
        what = "Muted: only the owner and admins may send." if muted else "Unmuted."
        audit.record_many(request, changing, what)
        verb = "Muted" if muted else "Unmuted"
        state = "were already muted" if muted else "were not muted"
        self._report(request, verb.removesuffix("d"), verb, count, state)

    def _report(self, request: HttpRequest, action: str, done: str, count: int, noop: str) -> None:
        if count:
            self.message_user(request, f"{done} {count} group(s).", messages.SUCCESS)
        else:
            self.message_user(request, f"{action}: the selected groups {noop}.", messages.INFO)


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
        count = self._set_role(request, queryset, GroupRole.MEMBER, GroupRole.ADMIN)
        if count:
            self.message_user(request, f"{count} member(s) made admin.", messages.SUCCESS)
        else:
            self.message_user(request, "Make admin: no selected member was an ordinary member.")

    @admin.action(description="Make ordinary member", permissions=["change"])
    def make_member(self, request: HttpRequest, queryset: QuerySet[GroupMember]) -> None:
        count = self._set_role(request, queryset, GroupRole.ADMIN, GroupRole.MEMBER)
        if count:
            self.message_user(request, f"{count} admin(s) made ordinary member.", messages.SUCCESS)
        else:
            self.message_user(request, "Make ordinary member: no selected member was an admin.")

    def _set_role(
        self, request: HttpRequest, queryset: QuerySet[GroupMember], was: str, role: str
    ) -> int:
        changing = list(queryset.filter(role=was))
        count = GroupMember.objects.filter(pk__in=[m.pk for m in changing], role=was).update(
            role=role
        )
        audit.record_many(request, changing, f"Role changed from {was} to {role}.")
        return count
