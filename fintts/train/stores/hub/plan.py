"""The account's private storage, as its plan on the Hub says it: what a session's start checks the run's room in.

The Hub's storage-limits page (https://huggingface.co/docs/hub/storage-limits, "Storage plans"):
private storage is 100 GB for a free user or organisation, "1TB + pay-as-you-go" for a PRO user,
"1TB per seat + pay-as-you-go" for Team and Enterprise organisations; past a free account's 100 GB
every upload is refused with 403 "Private repository storage limit reached" (huggingface_hub
#3048/#3049). Accounts that held more before the limits came keep it: "for existing users/orgs,
the limits come on top of the storage already used" (julien-c, announcing them, 2024-12-10:
https://huggingface.co/posts/julien-c/388331843225875). So a plan says for sure that uploads will be
refused only for a free account still within its 100 GB; a paid plan past its included terabyte
is billed (or refused, where pay-as-you-go is not set up), a free account already past 100 GB is an
older one, and an account whose plan the Hub did not say could be any of them: those warn.

Where the plan is, in ``/api/whoami-v2``'s answer: the user's ``isPro`` (huggingface_hub 2.4
``hf_api.py``, ``User.is_pro``; huggingface.js ``packages/hub/src/lib/who-am-i.ts``, ``WhoAmIUser.isPro``)
and each of ``orgs``' ``plan`` (huggingface_hub 2.4 ``Organization.plan``, "e.g. enterprise, team",
after huggingface_hub #3753 replaced the boolean ``isEnterprise``; huggingface.js marks the same field
deprecated, so it may be absent). A repo in a namespace the answer does not describe (another
user's, an org's without ``plan``) has an unknown plan. This module imports nothing of ours.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

#: Private storage of a free user or organisation (GB).
FREE_GB = 100.0
#: Private storage included in a PRO account, and per seat in a Team or Enterprise organisation (GB).
PAID_GB = 1000.0
#: Organisation plans of the storage-limits page (``Organization.plan``'s values, huggingface_hub 2.4).
PAID_ORG_PLANS = ("team", "enterprise")


@dataclasses.dataclass(frozen=True)
class Plan:
    """An account's plan: ``name`` as a person knows it, the private storage it includes (GB), and whether the Hub
    is known to refuse uploads past that (``False`` where it bills instead, or where the plan is not known)."""

    name: str
    limit_gb: float
    refuses: bool

    @property
    def known(self) -> bool:
        return self.name != UNKNOWN.name


FREE = Plan("free", FREE_GB, refuses=True)
PRO = Plan("PRO", PAID_GB, refuses=False)
#: The Hub did not say: the smallest plan's storage is where a warning starts.
UNKNOWN = Plan("unknown", FREE_GB, refuses=False)


def plan_of(whoami: Any, namespace: str) -> Plan:
    """The plan of ``namespace`` (the user's own, or one of their organisations) in ``whoami``'s answer."""
    if not isinstance(whoami, Mapping):
        return UNKNOWN
    if whoami.get("type", "user") == "user" and whoami.get("name") == namespace:
        pro = whoami.get("isPro")
        return UNKNOWN if not isinstance(pro, bool) else PRO if pro else FREE
    orgs = whoami.get("orgs")
    for org in orgs if isinstance(orgs, list) else []:
        if isinstance(org, Mapping) and org.get("name") == namespace:
            plan = str(org.get("plan") or "").lower()
            if plan in PAID_ORG_PLANS:
                return Plan(plan.capitalize(), PAID_GB, refuses=False)  # at least one seat's terabyte
            return FREE if plan == FREE.name else UNKNOWN
    return UNKNOWN


def judge(plan: Plan, used: int, needed: int) -> tuple[bool, str] | None:
    """Whether a session using ``used`` bytes whose next pushes need ``needed`` more must be refused (``True``) or
    warned about (``False``), and why; ``None`` when it fits in the plan's storage."""
    limit = plan.limit_gb * 1e9
    if used + needed <= limit:
        return None
    if not plan.known:
        return False, f"the Hub did not say the account's plan; a free account has {FREE_GB:g} GB"
    if plan.refuses and used <= limit:
        return True, f"a {plan.name} account has {plan.limit_gb:g} GB"
    if plan.refuses:
        return False, (f"a {plan.name} account has {plan.limit_gb:g} GB, but this one already uses more: an account older "
                       "than the limits keeps what it held, and the Hub refuses pushes past its own limit")
    return False, (f"a {plan.name} account includes {plan.limit_gb:g} GB{'' if plan.name == PRO.name else ' per seat'}; past "
                   "that the Hub bills pay-as-you-go storage, or refuses pushes where it is not set up")
