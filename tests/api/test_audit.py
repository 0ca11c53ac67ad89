"""The audit log (adminsite/audit.py, api/admin.py): every operator action outside campaigns writes
exactly one entry naming who, what and which action; an action that changed nothing writes none;
entries show on the object's History page and in the filterable, read-only list."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.contrib.messages import get_messages
from django.test import Client

from api.models import ApiClient, ApiClientSender
from groups.models import Group, GroupMember
from messaging.models import Conversation, Message
from tests.api.factories import inbox_api, send_api
from tests.groups.helpers import users_api
from unread.models import Announcement

pytestmark = pytest.mark.django_db
LOG = "/admin/admin/logentry/"


def entries(obj: Any) -> list[LogEntry]:
    kind = ContentType.objects.get_for_model(obj, for_concrete_model=False)
    return list(LogEntry.objects.filter(content_type=kind, object_id=str(obj.pk)).order_by("pk"))


def notices(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def act(admin_client: Client, url: str, action: str, *pks: Any) -> Any:
    return admin_client.post(url, {"action": action, "_selected_action": [str(p) for p in pks]})


def assert_one_entry(obj: Any, words: str, admin_client: Client, flag: int = CHANGE) -> LogEntry:
    [entry] = entries(obj)
    assert entry.user == User.objects.get(username="admin")
    assert entry.action_flag == flag
    assert words in entry.get_change_message()
    history = admin_client.get(f"{admin_url(obj)}history/")
    assert history.status_code == 200
    assert words in history.content.decode()
    return entry


def admin_url(obj: Any) -> str:
    meta = obj._meta
    return f"/admin/{meta.app_label}/{meta.model_name}/{obj.pk}/"


# -- API clients ------------------------------------------------------------------------------
def test_rotating_a_token_logs_one_entry_without_the_token(admin_client: Client) -> None:
    client = inbox_api("rotated").client
    response = act(admin_client, "/admin/api/apiclient/", "rotate_token", client.pk)
    token = re.search(r"(msv_[\w-]+)", " ".join(notices(response))).group(1)  # type: ignore[union-attr]
    client.refresh_from_db()
    entry = assert_one_entry(client, "Issued a new token", admin_client)
    assert client.token_prefix in entry.change_message
    assert token not in entry.change_message  # the token itself is never logged


def test_revoking_logs_once_and_revoking_again_logs_nothing(admin_client: Client) -> None:
    client = inbox_api("leaving").client
    act(admin_client, "/admin/api/apiclient/", "revoke_selected", client.pk)
    assert_one_entry(client, "Revoked", admin_client)
    act(admin_client, "/admin/api/apiclient/", "revoke_selected", client.pk)
    act(admin_client, "/admin/api/apiclient/", "rotate_token", client.pk)  # revoked: refused
    assert len(entries(client)) == 1


def client_form(client: ApiClient, scopes: list[str]) -> dict[str, Any]:
    sender = ApiClientSender.objects.get(client=client)
    return {
        "name": client.name,
        "scopes": scopes,
        "is_active": "on",
        "senders-TOTAL_FORMS": "1",
        "senders-INITIAL_FORMS": "1",
        "senders-MIN_NUM_FORMS": "0",
        "senders-MAX_NUM_FORMS": "1000",
        "senders-0-id": str(sender.pk),
        "senders-0-client": str(client.pk),
        "senders-0-uid": str(sender.uid),
    }


def test_a_scope_change_logs_one_entry_and_a_save_without_changes_none(
    admin_client: Client, uid: int
) -> None:
    client = send_api("scoped", [uid]).client
    url = f"/admin/api/apiclient/{client.pk}/change/"
    admin_client.post(url, client_form(client, ["send"]))
    assert entries(client) == []  # nothing changed: no entry
    admin_client.post(url, client_form(client, ["send", "inbox"]))
    assert_one_entry(client, "Changed scopes", admin_client)


# -- messages, groups, announcements ------------------------------------------------------------
def test_recalling_a_message_logs_once(
    admin_client: Client, uids: Callable[[int], list[int]]
) -> None:
    alice, bob = uids(2)
    key = send_api("app", [alice]).sent(alice, bob, "oops")
    message = Message.objects.get(pk=key)
    act(admin_client, "/admin/messaging/message/", "recall_selected", key)
    assert_one_entry(message, "Recalled", admin_client)
    act(admin_client, "/admin/messaging/message/", "recall_selected", key)  # already recalled
    assert len(entries(message)) == 1


def test_group_actions_log_what_they_changed(
    admin_client: Client, uids: Callable[[int], list[int]]
) -> None:
    owner, member = uids(2)
    gid = users_api().created(owner, [member])
    group = Group.objects.get(gid=gid)
    url = "/admin/groups/group/"
    act(admin_client, url, "mute_selected", gid)
    assert_one_entry(group, "Muted", admin_client)
    act(admin_client, url, "mute_selected", gid)  # already muted: nothing logged
    assert len(entries(group)) == 1

    row = GroupMember.objects.get(gid=gid, uid=member)
    act(admin_client, "/admin/groups/groupmember/", "make_admin", row.pk)
    act(admin_client, "/admin/groups/groupmember/", "make_admin", row.pk)
    assert_one_entry(row, "member to admin", admin_client)

    act(admin_client, url, "dissolve_selected", gid)
    act(admin_client, url, "dissolve_selected", gid)
    assert [e.change_message.split(":")[0] for e in entries(group)] == ["Muted", "Dissolved"]


def test_publishing_an_announcement_logs_one_addition(admin_client: Client) -> None:
    add = "/admin/unread/announcement/add/"
    admin_client.post(add, {"content": '{"type": "text"'})  # bad input: nothing stored or logged
    assert not LogEntry.objects.exists()
    good = '{"type": "text", "text": "maintenance at 02:00"}'
    admin_client.post(add, {"content": good})  # previewed, not confirmed: nothing published
    assert not LogEntry.objects.exists()
    admin_client.post(add, {"content": good, "confirm": "on"})
    [row] = Announcement.objects.all()
    assert_one_entry(row, "Published to every user", admin_client, flag=ADDITION)


# -- the list -----------------------------------------------------------------------------------
def test_the_audit_list_shows_filters_and_searches_entries(
    admin_client: Client, uids: Callable[[int], list[int]]
) -> None:
    client = inbox_api("listed").client
    act(admin_client, "/admin/api/apiclient/", "rotate_token", client.pk)
    owner, member = uids(2)
    gid = users_api().created(owner, [member])
    act(admin_client, "/admin/groups/group/", "mute_selected", gid)

    page = admin_client.get(LOG)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Audit log" in text
    assert text.index("Muted") < text.index("Issued a new token")  # newest first
    assert f'href="/admin/api/apiclient/{client.pk}/change/"' in text  # linked to its page
    assert "2 log entries" in text  # an exact count below the cap

    group_type = ContentType.objects.get_for_model(Group).pk
    only_groups = admin_client.get(LOG, {"content_type__id__exact": group_type}).content.decode()
    assert "Muted" in only_groups
    assert "Issued a new token" not in only_groups
    admin_id = User.objects.get(username="admin").pk
    assert "Muted" in admin_client.get(LOG, {"user__id__exact": admin_id}).content.decode()
    assert "Muted" not in admin_client.get(LOG, {"action_flag__exact": ADDITION}).content.decode()
    assert (
        "Muted"
        in admin_client.get(LOG, {"action_time__gte": "2000-01-01 00:00:00+00:00"}).content.decode()
    )
    found = admin_client.get(LOG, {"q": gid}).content.decode()
    assert "Muted" in found
    assert "Issued a new token" not in found
    assert "Issued a new token" in admin_client.get(LOG, {"q": "new token"}).content.decode()


def test_nobody_adds_changes_or_deletes_entries(admin_client: Client) -> None:
    client = inbox_api("kept").client
    act(admin_client, "/admin/api/apiclient/", "rotate_token", client.pk)
    [entry] = entries(client)
    assert admin_client.get(f"{LOG}add/").status_code == 403
    assert admin_client.get(f"{LOG}{entry.pk}/delete/").status_code == 403
    view = admin_client.get(f"{LOG}{entry.pk}/change/")
    assert view.status_code == 200
    assert 'name="_save"' not in view.content.decode()  # view only
    admin_client.post(f"{LOG}{entry.pk}/change/", {"change_message": "rewritten"})
    admin_client.post(LOG, {"action": "delete_selected", "_selected_action": [entry.pk]})
    assert LogEntry.objects.get(pk=entry.pk).change_message == entry.change_message


def test_read_only_admins_still_show_history(
    admin_client: Client, uids: Callable[[int], list[int]]
) -> None:
    alice, bob = uids(2)
    send_api("app", [alice]).sent(alice, bob, "hello")
    conv = Conversation.objects.get(owner_uid=bob, peer_uid=alice)
    page = admin_client.get(f"/admin/messaging/conversation/{conv.pk}/change/").content.decode()
    assert "history/" in page
    assert admin_client.get(f"/admin/messaging/conversation/{conv.pk}/history/").status_code == 200
