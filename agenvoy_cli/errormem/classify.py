"""Error types: what kind of failure a text describes (upstream's getMessage rules,
plus their Chinese equivalents)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agenvoy_cli.errors import BadInput

if TYPE_CHECKING:
    pass


ERROR_TYPES = ("tool_not_exist", "required_param", "invalid_param", "timeout", "permission",
               "no_result", "other")
TYPE_PREFIX = "error_type:"

_TYPE_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tool_not_exist", ("not exist:", "tool not found", "unsupported tool", "找不到工具",
                        "工具不存在", "不存在的工具", "沒有這個工具", "没有这个工具")),
    ("required_param", ("required", "必填", "必要參數", "必要参数", "缺少參數", "缺少参数")),
    ("invalid_param", ("invalid", "無效", "无效", "不合法", "格式錯誤", "格式错误")),
    ("timeout", ("timeout", "deadline exceeded", "逾時", "逾时", "超時", "超时")),
    ("permission", ("unauthorized", "forbidden", "permission denied", "access denied",
                    "權限", "权限", "拒絕存取", "拒绝访问", "拒絕訪問", "未授權", "未授权")),
    ("no_result", ("no result", "no data", "not found", "empty result",
                   "找不到", "不存在", "查無", "查无", "沒有結果", "没有结果", "無結果", "无结果")),
)
TYPE_TERM = re.compile(r"(?i)\berror_type:(\S*)")


def classify(text: str) -> str | None:
    """The error type of a text (upstream getMessage): the first rule that matches the
    lower-cased text; None for an empty text."""
    low = (text or "").lower()
    if not low.strip():
        return None
    for name, needles in _TYPE_RULES:
        if any(n in low for n in needles):
            return name
    return "other"



def check_type(error_type: str | None) -> str | None:
    if error_type is None:
        return None
    value = error_type.strip().lower()
    if value.startswith(TYPE_PREFIX):
        value = value[len(TYPE_PREFIX):]
    if value not in ERROR_TYPES:
        raise BadInput(f"unknown error type {error_type!r} (one of {', '.join(ERROR_TYPES)})")
    return value

