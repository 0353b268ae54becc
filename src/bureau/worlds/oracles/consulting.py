"""Oracle solutions for management-consulting tasks.

Copied to a task's `solution/solve.py`. `params.json` names the template and the parameters
that the question states (a segment, a year, a person and a date); every answer is read from
the workspace files with `oracle_lib`, the way an analyst would: the highest deck version, the
survey that is not in the archive, published (not draft) reports, and mail read oldest first so
later client decisions win.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import openpyxl
import oracle_lib as lib

STALE = ("draft", "prelim", "archive", "output")


def _files(ws: Path, pattern: str) -> list[Path]:
    """Current files matching `pattern`: no drafts, preliminary extracts or archived copies."""
    return sorted(
        p
        for p in ws.rglob(pattern)
        if not any(word in str(p.relative_to(ws)).lower() for word in STALE)
    )


def _one(ws: Path, pattern: str) -> Path:
    found = _files(ws, pattern)
    if len(found) != 1:
        raise RuntimeError(f"expected one current {pattern}, got {found}")
    return found[0]


# -- deck ------------------------------------------------------------------------------------
def _deck(ws: Path) -> list[dict[str, Any]]:
    def version(path: Path) -> int:
        m = re.search(r"_v(\d+)", path.name)
        return int(m.group(1)) if m else 0

    return lib.pptx_slides(max(ws.rglob("market_sizing_v*.pptx"), key=version))


def _table(slide: dict[str, Any]) -> dict[str, dict[str, str]]:
    header, *rows = slide["tables"][0]
    return {row[0]: dict(zip(header, row, strict=True)) for row in rows}


def _titled(slides: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    return next(s for s in slides if s["title"].startswith(prefix))


def _deck_value(slides: list[dict[str, Any]], metric: str, segment: str, year: int) -> float:
    table = _table(_titled(slides, f"{metric} by segment"))
    return lib.parse_number(table[segment][str(year)])


def _deck_growth(ws: Path) -> dict[str, float]:
    table = _table(_titled(_deck(ws), "Growth assumptions"))
    return {seg: lib.parse_number(list(row.values())[1]) for seg, row in table.items()}


def _agreed_growth(ws: Path) -> dict[str, float]:
    growth = _deck_growth(ws)
    for mail in lib.read_mailbox(ws / "mail"):  # oldest first: the latest revision wins
        body = lib.flat(mail["body"])
        for m in re.finditer(r"growth rate of ([\d.]+)% for the (.+?) segment", body):
            growth[m.group(2)] = float(m.group(1))
    return growth


# -- survey and interviews -------------------------------------------------------------------
def _survey(ws: Path) -> list[dict[str, Any]]:
    return lib.xlsx_records(_one(ws, "*survey*.xlsx"), "Responses")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _wtp(rows: list[dict[str, Any]]) -> float:
    return _mean([r["Willingness to pay (USD)"] for r in rows])


def _interviewees(ws: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in _files(ws, "interview_notes*.docx"):
        for style, text in lib.docx_paragraphs(path):
            if style == "Heading 1" and text.startswith("Interview"):
                out.append({"name": text.split(": ", 1)[1], "file": path})
            elif out and text.startswith("Role: "):
                out[-1]["role"] = text.removeprefix("Role: ")
            elif out and text.startswith("Company: "):
                m = re.fullmatch(r"Company: (.+) \((.+) segment\)", text)
                if m is None:
                    raise RuntimeError(f"unexpected company line {text!r}")
                out[-1]["company"], out[-1]["segment"] = m.groups()
            elif out and "USD" in text and "budget" not in out[-1]:
                out[-1]["budget"] = lib.number_after(text, "USD")
            elif out and text.startswith("Date: "):
                out[-1]["date"] = lib.iso(lib.parse_date(text.removeprefix("Date: ")))
    return out


# -- contract --------------------------------------------------------------------------------
def _milestones(ws: Path) -> list[dict[str, str]]:
    return lib.pdf_table_with(_one(ws, "statement_of_work*.pdf"), "Fee (USD)")


def _current_fees(ws: Path) -> tuple[dict[str, float], list[str]]:
    fees = {r["Milestone"]: lib.parse_number(r["Fee (USD)"]) for r in _milestones(ws)}
    approved: list[str] = []
    for mail in lib.read_mailbox(ws / "mail"):
        body = lib.flat(mail["body"])
        for cr in re.findall(r"we approve change request (CR-\d+)", body):
            fields = {row[0]: row[1] for row in lib.docx_tables(_one(ws, f"{cr}_*.docx"))[0]}
            fees[fields["Milestone"]] = lib.parse_number(fields["Proposed fee (USD)"])
            approved.append(cr)
    return fees, approved


# -- solvers ---------------------------------------------------------------------------------
def deck_tam(ws: Path, p: dict[str, Any]) -> None:
    slides = _deck(ws)
    tam = _deck_value(slides, "TAM", p["segment"], p["year"])
    sam = _deck_value(slides, "SAM", p["segment"], p["year"])
    lib.write_answer(ws, {"tam": tam, "sam": sam, "sam_share_pct": round(100 * sam / tam, 1)})


def regional_leader(ws: Path, p: dict[str, Any]) -> None:
    chart = _titled(_deck(ws), "Regional share")["charts"][0]
    shares = next(iter(chart["series"].values()))
    ranked = sorted(zip(chart["categories"], shares, strict=True), key=lambda kv: -kv[1])
    (region, share), (_, after) = ranked[p["rank"] - 1], ranked[p["rank"]]
    lib.write_answer(ws, {"region": region, "share_pct": share, "lead_pp": round(share - after, 1)})


def survey_satisfaction(ws: Path, p: dict[str, Any]) -> None:
    rows = [
        r
        for r in _survey(ws)
        if r["Segment"] == p["segment"] and p["region"] in (None, r["Region"])
    ]
    hits = sum(1 for r in rows if r["Satisfaction (1-5)"] >= p["threshold"])
    lib.write_answer(
        ws,
        {
            "respondents": len(rows),
            "satisfied": hits,
            "share_pct": round(100 * hits / len(rows), 1),
            "avg_satisfaction": round(_mean([r["Satisfaction (1-5)"] for r in rows]), 2),
        },
    )


def survey_wtp(ws: Path, p: dict[str, Any]) -> None:
    rows = [r for r in _survey(ws) if r["Segment"] == p["segment"]]
    regions = sorted({r["Region"] for r in rows})
    by_region = {g: _wtp([r for r in rows if r["Region"] == g]) for g in regions}
    top = max(by_region, key=lambda g: by_region[g])
    lib.write_answer(
        ws,
        {
            "avg_wtp": round(_wtp(rows), 2),
            "top_region": top,
            "top_region_avg_wtp": round(by_region[top], 2),
        },
    )


def interviewee_budget(ws: Path, p: dict[str, Any]) -> None:
    mail = next(
        m
        for m in lib.read_mailbox(ws / "mail")
        if p["sender"] in m["from"]
        and lib.iso(m["date"]) == p["date"]
        and "interview" in m["subject"].lower()
    )
    m = re.search(r"the ([^,]+?) at ([^,]+?) mentioned a budget", lib.flat(mail["body"]))
    if m is None:
        raise RuntimeError("no interview reference in the email")
    role, company = m.groups()
    iv = next(i for i in _interviewees(ws) if i["role"] == role and i["company"] == company)
    lib.write_answer(
        ws,
        {
            "interviewee": iv["name"],
            "segment": iv["segment"],
            "budget": iv["budget"],
            "interview_date": iv["date"],
        },
    )


def slide_request(ws: Path, p: dict[str, Any]) -> None:
    if p["channel"] == "email":
        texts = [
            lib.flat(m["body"])
            for m in lib.read_mailbox(ws / "mail")
            if p["person"] in m["from"] and lib.iso(m["date"]) == p["date"]
        ]
    else:
        texts = [
            m["text"]
            for m in lib.read_chat(ws / "chat" / "engagement.json")
            if m["user"] == p["person"] and m["time"].startswith(p["date"])
        ]
    m = next(
        found
        for t in texts
        if (found := re.search(r"the (\d{4}) figure for (.+?) on slide (\d+)", t))
    )
    year, segment, number = int(m.group(1)), m.group(2), int(m.group(3))
    slide = _deck(ws)[number - 1]  # slide 1 is the cover
    value = lib.parse_number(_table(slide)[segment][str(year)])
    metric = slide["title"].split()[0]
    lib.write_answer(ws, {"segment": segment, "metric": metric, "value": value})


def growth_revision(ws: Path, p: dict[str, Any]) -> None:
    seg, year = p["segment"], p["year"]
    slides = _deck(ws)
    header = _titled(slides, "TAM by segment")["tables"][0][0]
    base_year = int(header[1])
    base = _deck_value(slides, "TAM", seg, base_year)
    agreed = _agreed_growth(ws)[seg]
    lib.write_answer(
        ws,
        {
            "deck_growth_pct": _deck_growth(ws)[seg],
            "agreed_growth_pct": agreed,
            "tam": round(base * (1 + agreed / 100) ** (year - base_year), 1),
        },
    )


def industry_cagr(ws: Path, p: dict[str, Any]) -> None:
    text = lib.flat(lib.pdf_text(_one(ws, "*outlook*.pdf")))
    at = text.find(f"{p['segment']} outlook")
    m = re.compile(r"CAGR of ([\d.]+)%").search(text, at)
    if at < 0 or m is None:
        raise RuntimeError(f"no outlook for {p['segment']}")
    cagr, agreed = float(m.group(1)), _agreed_growth(ws)[p["segment"]]
    lib.write_answer(
        ws,
        {
            "report_cagr_pct": cagr,
            "agreed_growth_pct": agreed,
            "difference_pp": round(cagr - agreed, 2),
        },
    )


def sow_milestone(ws: Path, p: dict[str, Any]) -> None:
    total = lib.number_after(lib.pdf_text(_one(ws, "statement_of_work*.pdf")), "Total fees:")
    row = next((r for r in _milestones(ws) if r["Milestone"] == p["milestone"]), None)
    if row is None:
        reason = f'The signed statement of work has no milestone "{p["milestone"]}".'
        unknown = {"fee": None, "milestone_number": None, "due_date": None}
        lib.write_answer(ws, {**unknown, "total_fees": total, "unsupported_reason": reason})
        return
    lib.write_answer(
        ws,
        {
            "fee": lib.parse_number(row["Fee (USD)"]),
            "milestone_number": int(row["No."]),
            "due_date": row["Due date"],
            "total_fees": total,
        },
    )


def fee_change(ws: Path, p: dict[str, Any]) -> None:
    fees, approved = _current_fees(ws)
    signed = next(r for r in _milestones(ws) if r["Milestone"] == p["milestone"])
    lib.write_answer(
        ws,
        {
            "original_fee": lib.parse_number(signed["Fee (USD)"]),
            "fee": fees[p["milestone"]],
            "total_fees": sum(fees.values()),
            "approved_change_requests": approved,
        },
    )


def fee_update_memo(ws: Path, p: dict[str, Any]) -> None:
    fees, approved = _current_fees(ws)
    paragraphs = []
    for path in sorted(ws.glob("engagement/contract/change_requests/CR-*.docx")):
        fields = {r[0]: r[1] for r in lib.docx_tables(path)[0]}
        cr, milestone = fields["Change request"], fields["Milestone"]
        fee = f"{int(fees[milestone]):,}"
        if cr in approved:
            paragraphs.append(
                f"{cr} ({milestone}): approved by the client; the fee is now USD {fee}."
            )
        else:
            paragraphs.append(f"{cr} ({milestone}): not approved; the fee stays USD {fee}.")
    total = sum(fees.values())
    paragraphs += [
        f"total fees: USD {int(total):,}",
        f"approved change requests: {', '.join(sorted(approved))}",
    ]
    lib.write_memo_docx(ws / "output" / "fee_update_memo.docx", p["heading"], paragraphs)
    lib.write_answer(ws, {"total_fees": total, "approved_change_requests": approved})


def milestone_invoice(ws: Path, p: dict[str, Any]) -> None:
    fees, approved = _current_fees(ws)
    row = next(r for r in _milestones(ws) if r["Milestone"] == p["milestone"])
    applied = "none"
    for cr in approved:
        fields = {r[0]: r[1] for r in lib.docx_tables(_one(ws, f"{cr}_*.docx"))[0]}
        if fields["Milestone"] == p["milestone"]:
            applied = cr
    terms = lib.flat(lib.pdf_text(_one(ws, "statement_of_work*.pdf")))
    days = int(lib.number_after(terms, "payable within"))
    accepted = next(
        e["start"]
        for e in lib.ics_events(ws / "calendar" / "engagement_milestones.ics")
        if e["SUMMARY"].startswith(f"Acceptance meeting: milestone {row['No.']} ")
    )
    lib.write_answer(
        ws,
        {
            "invoice_amount": fees[p["milestone"]],
            "change_request": applied,
            "invoice_date": lib.iso(accepted),
            "payment_due": lib.iso(accepted + timedelta(days=days)),
        },
    )


BILLING = "output/billing_plan.xlsx"


def billing_plan(ws: Path, p: dict[str, Any]) -> None:
    """Step `fees` writes the fees in force; step `invoices` reads the milestones back from
    that sheet (the earlier step's deliverable) and adds the invoice schedule."""
    if p["step"] == "fees":
        fees, approved = _current_fees(ws)
        names = [(r["Milestone"], int(r["No."])) for r in _milestones(ws)]
        rows: list[list[Any]] = [[name, number, fees[name]] for name, number in names]
        lib.write_table_xlsx(ws / BILLING, "Fees", ["Milestone", "No.", "Fee"], rows)
        total = sum(fees[name] for name, _ in names)
        lib.write_answer(ws, {"total_fees": total, "approved_change_requests": approved})
        return
    terms = lib.flat(lib.pdf_text(_one(ws, "statement_of_work*.pdf")))
    days = int(lib.number_after(terms, "payable within"))
    events = lib.ics_events(ws / "calendar" / "engagement_milestones.ics")
    planned = lib.xlsx_records(ws / BILLING, "Fees")
    wb = openpyxl.load_workbook(ws / BILLING)
    sheet = wb.create_sheet("Invoices")
    sheet.append(["Milestone", "Invoice Date", "Payment Due"])
    schedule = []
    for row in planned:
        name = row["Milestone"]
        day = next(e["start"] for e in events if e["SUMMARY"].endswith(f"({name})"))
        due = day + timedelta(days=days)
        sheet.append([name, lib.iso(day), lib.iso(due)])
        schedule.append((day, due))
    wb.save(ws / BILLING)
    last = max(schedule)
    lib.write_answer(
        ws, {"last_invoice_date": lib.iso(last[0]), "last_payment_due": lib.iso(last[1])}
    )


def interview_budgets(ws: Path, p: dict[str, Any]) -> None:
    ivs = [i for i in _interviewees(ws) if i["segment"] == p["segment"]]
    lib.write_answer(
        ws,
        {
            "interviewees": [i["name"] for i in ivs],
            "total_budget": sum(i["budget"] for i in ivs),
            "largest_budget": max(i["budget"] for i in ivs),
        },
    )


def segment_deck(ws: Path, p: dict[str, Any]) -> None:
    slides = _deck(ws)
    tam = _table(_titled(slides, "TAM by segment"))
    sam = _table(_titled(slides, "SAM by segment"))
    year = str(p["year"])
    rows: list[list[Any]] = [
        [seg, lib.parse_number(tam[seg][year]), lib.parse_number(sam[seg][year])] for seg in tam
    ]
    total = [round(sum(r[k] for r in rows), 1) for k in (1, 2)]
    rows.append(["Total", *total])
    lib.write_table_pptx(
        ws / p["path"], p["title"], ["Segment", "TAM (USD m)", "SAM (USD m)"], rows
    )
    lib.write_answer(ws, {"total_tam": total[0]})


def survey_averages(ws: Path, p: dict[str, Any]) -> None:
    rows = [r for r in _survey(ws) if r["Region"] == p["region"]]
    segments = list(dict.fromkeys(r["Segment"] for r in _survey(ws)))
    table: list[list[Any]] = []
    for label, mine in [(s, [r for r in rows if r["Segment"] == s]) for s in segments] + [
        ("All", rows)
    ]:
        sat = _mean([r["Satisfaction (1-5)"] for r in mine])
        table.append([label, len(mine), round(sat, 2), round(_wtp(mine), 2)])
    header = ["Segment", "Respondents", "Avg Satisfaction", "Avg WTP"]
    lib.write_table_xlsx(ws / p["path"], "Averages", header, table)
    lib.write_answer(ws, {"respondents": len(rows)})


def starter_named_range(ws: Path, p: dict[str, Any]) -> None:
    path = _one(ws, "*survey*.xlsx")
    wb = openpyxl.load_workbook(path)
    sheet, _ = next(iter(wb.defined_names[p["name"]].destinations))
    value = lib.xlsx_named(path, p["name"])
    lib.write_answer(ws, {"value": round(float(value), 2), "sheet": sheet})


def starter_growth_email(ws: Path, p: dict[str, Any]) -> None:
    mail = next(m for m in lib.read_mailbox(ws / "mail") if m["path"] == ws / p["path"])
    body = lib.flat(mail["body"])
    m = re.search(r"growth rate of ([\d.]+)% for the (.+?) segment instead of the ([\d.]+)%", body)
    if m is None:
        raise RuntimeError("no revision in the email")
    lib.write_answer(
        ws,
        {
            "segment": m.group(2),
            "new_growth_pct": float(m.group(1)),
            "old_growth_pct": float(m.group(3)),
        },
    )


def starter_interview(ws: Path, p: dict[str, Any]) -> None:
    iv = next(i for i in _interviewees(ws) if i["name"] == p["name"])
    lib.write_answer(ws, {"budget": iv["budget"], "company": iv["company"]})


SOLVERS = {
    f"consulting.{f.__name__}": f
    for f in (
        deck_tam,
        regional_leader,
        survey_satisfaction,
        survey_wtp,
        interviewee_budget,
        slide_request,
        growth_revision,
        industry_cagr,
        sow_milestone,
        fee_change,
        milestone_invoice,
        interview_budgets,
        segment_deck,
        survey_averages,
        starter_named_range,
        starter_growth_email,
        starter_interview,
    )
}


def brief(ws: Path, p: dict[str, Any]) -> None:
    """A brief's items, each by its own template's solver (`bureau.worlds.briefs`)."""
    lib.solve_items(SOLVERS, ws, p)


SOLVERS["consulting.brief"] = SOLVERS["consulting.brief_unseen"] = brief
SOLVERS["consulting.sow_milestone_unsupported"] = sow_milestone
SOLVERS["consulting.billing_plan"] = billing_plan
SOLVERS["consulting.fee_update_memo"] = fee_update_memo


def solve(params: dict[str, Any], workspace: Path) -> None:
    SOLVERS[params["template"]](workspace, params)


if __name__ == "__main__":
    lib.run_solver(SOLVERS, __doc__)
