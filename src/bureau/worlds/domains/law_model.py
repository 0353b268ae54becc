"""Corporate-law world content: the contracts, NDAs, board meetings and matters of a world.

`law` draws these facts and writes them to files; `law_tasks` asks questions about them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from ..fabric import Person
from ..spec import WorldContext

KINDS = {
    "Master Services Agreement": "msa",
    "Supply Agreement": "supply",
    "Software License Agreement": "license",
    "Distribution Agreement": "distribution",
}
LAWS = (
    *("Delaware", "Texas", "New York", "Illinois", "California", "Scotland"),
    *("England and Wales", "Quebec", "Ontario", "Singapore"),
    *("Florida", "Massachusetts", "Washington", "Ireland", "Hong Kong"),
)
"""Governing laws; a world draws from its split's part (`fabric.split_part`)."""
ROLES = (
    "Project Manager",
    "Solution Architect",
    "Senior Engineer",
    "Engineer",
    "Data Analyst",
    "Support Specialist",
    "Trainer",
)
CP_SUFFIX = ("Systems", "Partners", "Supply Co", "Analytics", "Logistics", "Labs", "Components")
RESOLUTIONS = (
    "Approval of the annual budget",
    "Appointment of the external auditor",
    "Renewal of the revolving credit facility",
    "Adoption of the revised code of conduct",
    "Approval of the share buyback programme",
    "Acquisition of a minority stake in a supplier",
    "Opening of a subsidiary in {city}",
    "Executive bonus pool for the year",
    "Ratification of the dividend policy",
    "Approval of the sustainability report",
    "Extension of the chief executive's service agreement",
    "Disposal of the logistics warehouse",
    "Issue of new shares under the employee plan",
    "Entry into the joint venture agreement",
    "Change of the company's registered office",
    "Adoption of the whistleblowing procedure",
    "Approval of the capital expenditure plan",
    "Appointment of a new non-executive director",
    "Approval of the interim accounts",
    "Renewal of the directors' insurance policy",
    "Adoption of the data protection policy",
    "Approval of changes to the pension scheme",
    "Sale of the legacy product line",
    "Establishment of a risk committee",
)
"""Board resolutions; a world draws from its split's part."""
REGISTER = "contracts/contract_register.xlsx"
DEADLINES = "calendar/legal_deadlines.ics"


@dataclass
class Contract:
    cid: str
    counterparty: str
    kind: str
    effective: date
    expiry: date
    annual_value: int
    governing_law: str
    notice_days: int
    liability_cap: int
    payment_days: int
    fees: list[tuple[str, int]]
    executed_pdf: str | None = None
    amended_notice_days: int | None = None
    amendment_mail: str | None = None

    @property
    def current_notice_days(self) -> int:
        return self.amended_notice_days or self.notice_days


@dataclass
class Nda:
    counterparty: str
    effective: date
    survival_years: int
    file: str

    @property
    def confidentiality_end(self) -> date:
        return self.effective.replace(year=self.effective.year + self.survival_years)


@dataclass
class Resolution:
    number: int
    title: str
    votes_for: list[str]
    against: list[str]
    abstain: list[str]

    @property
    def passed(self) -> bool:
        return len(self.votes_for) > len(self.against)


@dataclass
class Meeting:
    held: date
    file: str
    resolutions: list[Resolution]


@dataclass
class Matter:
    name: str
    court: str
    claimed: int
    hearing: date
    file: str
    rescheduled: date | None = None

    @property
    def next_hearing(self) -> date:
        return self.rescheduled or self.hearing


@dataclass
class LawFacts:
    ctx: WorldContext
    gc: Person
    partner: Person
    team: list[Person]
    directors: list[str]
    contracts: list[Contract]
    ndas: list[Nda] = field(default_factory=list)
    meetings: list[Meeting] = field(default_factory=list)
    matters: list[Matter] = field(default_factory=list)
    flags: list[tuple[str, date, str]] = field(default_factory=list)  # person, day, contract id
    hearing_mail: str = ""
    serve_on: dict[str, date] = field(default_factory=dict)
    """Contract id -> the day the legal deadlines calendar now plans its termination notice."""
