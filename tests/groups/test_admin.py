"""Operators' admin of groups: member counts, members paged and searched by exact id, and the
dissolve, mute and make-admin actions doing what members then see through the API."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from groups.models import Group, GroupMember
from tests.groups.helpers import GroupsApi, users_api

pytestmark = pytest.mark.django_db
ADMIN = "/admin/groups"


@pytest.fixture
def api() -> GroupsApi:
    return users_api()


def test_group_pages_show_member_counts_and_search_members(
    admin_client: Client, api: GroupsApi, uids: Callable[[int], list[int]]
) -> None:
    owner, *members = uids(5)
    gid = api.created(owner, members, name="book club")

    groups = admin_client.get(f"{ADMIN}/group/", {"q": gid})
    assert groups.status_code == 200
    assert b"book club" in groups.content
    assert b'<td class="field-member_count">5</td>' in groups.content
    assert admin_client.get(f"{ADMIN}/group/{gid}/change/").status_code == 200
    found = admin_client.get(f"{ADMIN}/groupmember/", {"q": str(members[2])})
    assert found.status_code == 200
    assert str(members[2]).encode() in found.content
    assert str(members[1]).encode() not in found.content
    assert admin_client.get(f"{ADMIN}/groupmember/", {"q": "not-an-id"}).status_code == 200


def test_mute_dissolve_and_make_admin_actions(
    admin_client: Client, api: GroupsApi, uids: Callable[[int], list[int]]
) -> None:
    owner, member, newcomer = uids(3)
    gid = api.created(owner, [member])
    url = f"{ADMIN}/group/"

    admin_client.post(url, {"action": "mute_selected", "_selected_action": [gid]})
    assert api.send(gid, member, "hello")[0] == 403  # muted: only the owner and admins send
    assert api.send(gid, owner, "hello")[0] == 201

    row = GroupMember.objects.get(gid=gid, uid=member)
    members_url = f"{ADMIN}/groupmember/"
    admin_client.post(members_url, {"action": "make_admin", "_selected_action": [row.pk]})
    assert api.send(gid, member, "as admin")[0] == 201
    assert api.add(gid, member, [newcomer])[1] == {"added": 1, "already_members": 0}

    admin_client.post(url, {"action": "unmute_selected", "_selected_action": [gid]})
    assert api.send(gid, newcomer, "hi")[0] == 201
    admin_client.post(url, {"action": "dissolve_selected", "_selected_action": [gid]})
    assert Group.objects.get(gid=gid).dissolved_at is not None
    assert api.call("GET", f"/groups/{gid}")[0] == 404
    assert api.groups(member) == []
