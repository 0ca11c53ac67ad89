"""Template tags of the big-table changelists (adminsite/paging.py): Django's search form and
pagination, rendered by templates that show the list's honest count line instead of a number."""

from __future__ import annotations

from typing import Any

from django import template
from django.contrib.admin.templatetags.admin_list import pagination, search_form

register = template.Library()


@register.inclusion_tag("admin/big_table/search_form.html")
def big_table_search_form(cl: Any) -> dict[str, Any]:
    return search_form(cl)


@register.inclusion_tag("admin/big_table/pagination.html")
def big_table_pagination(cl: Any) -> dict[str, Any]:
    return pagination(cl)
