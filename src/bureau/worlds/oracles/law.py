"""Oracle solutions for corporate-law tasks.

Copied to a task's `solution/solve.py`. `params.json` names the template and the parameters
that the question states (a counterparty, a date, a person); every answer is read from the
workspace files with `oracle_lib`, never from the rubric.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import openpyxl
import oracle_lib as lib

REGISTER = "contracts/contract_register.xlsx"


def _slug(text: str) -> str:
    out = "".join(ch.lower() if ch.isalnum() else "-" for ch in text)
    return "-".join(part for part in out.split("-") if part)


def _executed_pdf(ws: Path, counterparty: str) -> Path:
    matches = sorted((ws / "contracts" / "executed").glob(f"*_{_slug(counterparty)}_*.pdf"))
    if len(matches) != 1:
        raise RuntimeError(f"expected one executed contract for {counterparty}, got {matches}")
    return matches[0]


def _register(ws: Path) -> list[dict[str, Any]]:
    return lib.xlsx_records(ws / REGISTER, "Register")


def _contract_row(ws: Path, counterparty: str) -> dict[str, Any]:
    return next(r for r in _register(ws) if r["Counterparty"] == counterparty)


def _current_notice_days(ws: Path, counterparty: str) -> int:
    text = lib.pdf_text(_executed_pdf(ws, counterparty))
    days = int(lib.number_after(lib.section(text, "Termination"), "not less than"))
    cid = _contract_row(ws, counterparty)["Contract ID"]
    for mail in lib.read_mailbox(ws / "mail"):  # oldest first: later amendments win
        if cid in mail["subject"] and "amendment" in mail["subject"].lower():
            m = re.search(r"changes from (\d+) days to (\d+) days", mail["body"])
            if m:
                days = int(m.group(2))
    return days


def _governing_law(text: str) -> str:
    pattern = r"governed by the laws of (?:the (?:State|Province) of )?([A-Za-z ]+?)\."
    m = re.search(pattern, lib.flat(text))
    if m is None:
        raise RuntimeError("no governing-law clause")
    return m.group(1).strip()


def liability_cap(ws: Path, p: dict[str, Any]) -> None:
    party = p["counterparty"]
    if not list((ws / "contracts" / "executed").glob(f"*_{_slug(party)}_*.pdf")):
        reason = f"No executed agreement with {party} is in the files; the register lists it."
        lib.write_answer(
            ws, {"liability_cap": None, "governing_law": None, "unsupported_reason": reason}
        )
        return
    text = lib.pdf_text(_executed_pdf(ws, party))
    cap = lib.number_after(lib.section(text, "Limitation of Liability"), "shall not exceed")
    lib.write_answer(ws, {"liability_cap": cap, "governing_law": _governing_law(text)})


def fee_schedule(ws: Path, p: dict[str, Any]) -> None:
    rows = lib.pdf_table_with(_executed_pdf(ws, p["counterparty"]), "Hourly rate")
    rates = {r["Role"]: lib.parse_number(r["Hourly rate (USD)"]) for r in rows}
    r1, r2 = (rates[role] for role in p["roles"])
    h1, h2 = p["hours"]
    lib.write_answer(ws, {"rate_1": r1, "rate_2": r2, "total_cost": h1 * r1 + h2 * r2})


def _deadline(ws: Path, counterparty: str) -> tuple[int, date, date]:
    days = _current_notice_days(ws, counterparty)
    expiry = date.fromisoformat(str(_contract_row(ws, counterparty)["Expiry"])[:10])
    return days, expiry, expiry - timedelta(days=days)


def notice_current(ws: Path, p: dict[str, Any]) -> None:
    days, expiry, deadline = _deadline(ws, p["counterparty"])
    lib.write_answer(
        ws,
        {"notice_days": days, "expiry_date": lib.iso(expiry), "notice_deadline": lib.iso(deadline)},
    )


def register_total(ws: Path, p: dict[str, Any]) -> None:
    rows = [
        r
        for r in _register(ws)
        if r["Governing Law"] == p["law"] or str(r["Expiry"]).startswith(str(p["year"]))
    ]
    lib.write_answer(
        ws,
        {
            "count": len(rows),
            "total_annual_value": sum(r["Annual Value (USD)"] for r in rows),
            "contract_ids": [r["Contract ID"] for r in rows],
        },
    )


def _minutes_text(ws: Path, held: str) -> str:
    for path in sorted((ws / "board").glob(f"minutes_{held}.*")):
        if path.suffix == ".docx":
            return lib.flat(" ".join(t for _, t in lib.docx_paragraphs(path)))
        return lib.flat(lib.pdf_text(path))
    raise RuntimeError(f"no minutes for {held}")


def _names(listed: str) -> list[str]:
    return [] if listed.strip() == "none" else [n.strip() for n in listed.split(",")]


def board_votes(ws: Path, p: dict[str, Any]) -> None:
    text = _minutes_text(ws, p["meeting_date"])
    m = re.search(
        rf"Resolution {p['resolution']}: .*?Votes for: (.*?)\. Votes against: (.*?)\. "
        r"Abstained: (.*?)\.",
        text,
    )
    if m is None:
        raise RuntimeError(f"resolution {p['resolution']} not found")
    votes_for, against, abstained = (_names(g) for g in m.groups())
    lib.write_answer(
        ws,
        {
            "voted_against": against,
            "abstained": abstained,
            "passed": "yes" if len(votes_for) > len(against) else "no",
        },
    )


def nda_confidentiality(ws: Path, p: dict[str, Any]) -> None:
    flagged = next(
        m
        for m in lib.read_chat(ws / "chat" / "legal-ops.json")
        if m["user"] == p["person"] and m["time"].startswith(p["date"]) and "flagged" in m["text"]
    )
    cid = re.search(r"C-\d+", flagged["text"]).group(0)  # type: ignore[union-attr]
    counterparty = next(r for r in _register(ws) if r["Contract ID"] == cid)["Counterparty"]
    paragraphs = lib.docx_paragraphs(ws / "legal" / "ndas" / f"nda_{_slug(counterparty)}.docx")
    text = " ".join(t for _, t in paragraphs)
    effective = lib.dates_in(text.split("Effective Date")[0])[0]
    ordinal = re.search(r"until the (\w+) anniversary", text).group(1)  # type: ignore[union-attr]
    words = ["first", "second", "third", "fourth", "fifth", "sixth"]
    years = words.index(ordinal) + 1 if ordinal in words else int(re.sub(r"\D", "", ordinal))
    end = effective.replace(year=effective.year + years)
    lib.write_answer(ws, {"counterparty": counterparty, "confidentiality_end": lib.iso(end)})


def _hearing(ws: Path, matter: str) -> date:
    hearing: date | None = None
    for memo in sorted((ws / "litigation").glob("*.docx")):
        table = lib.docx_tables(memo)[0]
        if any(matter in t for _, t in lib.docx_paragraphs(memo)):
            hearing = date.fromisoformat(dict((r[0], r[1]) for r in table)["Next hearing"])
    for mail in lib.read_mailbox(ws / "mail"):
        if matter in mail["subject"] and "hearing" in mail["subject"].lower():
            hearing = lib.dates_in(mail["body"].split("now listed for")[1])[0]
    if hearing is None:
        raise RuntimeError(f"no hearing found for {matter}")
    return hearing


def litigation_exposure(ws: Path, p: dict[str, Any]) -> None:
    total = 0.0
    for memo in sorted((ws / "litigation").glob("*.docx")):
        fields = {r[0]: r[1] for r in lib.docx_tables(memo)[0]}
        total += lib.parse_number(fields["Amount claimed"])
    lib.write_answer(
        ws, {"total_claimed": total, "next_hearing": lib.iso(_hearing(ws, p["matter"]))}
    )


def termination_plan(ws: Path, p: dict[str, Any]) -> None:
    row = _contract_row(ws, p["counterparty"])
    cid = row["Contract ID"]
    days = _current_notice_days(ws, p["counterparty"])
    serve = next(
        e["start"]
        for e in lib.ics_events(ws / "calendar" / "legal_deadlines.ics")
        if e["SUMMARY"].startswith("Serve termination notice") and cid in e["SUMMARY"]
    )
    end = min(serve + timedelta(days=days), lib.parse_date(str(row["Expiry"])))
    lib.write_answer(
        ws,
        {
            "contract_id": cid,
            "notice_days": days,
            "serve_date": lib.iso(serve),
            "end_date": lib.iso(end),
            "annual_value": row["Annual Value (USD)"],
        },
    )


PIPELINE = "output/renewal_pipeline.xlsx"


def renewal_pipeline(ws: Path, p: dict[str, Any]) -> None:
    """Step `pipeline` writes the workbook from the register; step `by_law` reads the
    pipeline back from that workbook (the earlier step's deliverable) and adds a sheet."""
    register = {r["Contract ID"]: r for r in _register(ws)}
    if p["step"] == "pipeline":
        rows = sorted(
            (r for r in register.values() if r["Annual Value (USD)"] >= p["min_value"]),
            key=lambda r: (-r["Annual Value (USD)"], r["Contract ID"]),
        )
        table = [
            [r["Contract ID"], r["Counterparty"], r["Annual Value (USD)"], str(r["Expiry"])]
            for r in rows
        ]
        header = ["Contract ID", "Counterparty", "Annual Value", "Expiry"]
        lib.write_table_xlsx(ws / PIPELINE, "Pipeline", header, table)
        total = sum(r["Annual Value (USD)"] for r in rows)
        lib.write_answer(ws, {"count": len(rows), "total_value": total})
        return
    pipeline = lib.xlsx_records(ws / PIPELINE, "Pipeline")
    sums: dict[str, list[float]] = {}
    for row in pipeline:
        law = register[row["Contract ID"]]["Governing Law"]
        sums.setdefault(law, []).append(float(row["Annual Value"]))
    wb = openpyxl.load_workbook(ws / PIPELINE)
    sheet = wb.create_sheet("By Law")
    sheet.append(["Governing Law", "Contracts", "Total Value"])
    for law, values in sorted(sums.items(), key=lambda kv: (-sum(kv[1]), kv[0])):
        sheet.append([law, len(values), sum(values)])
    wb.save(ws / PIPELINE)
    largest = max(sums, key=lambda law: (sum(sums[law]), law))
    lib.write_answer(ws, {"largest_law": largest, "largest_law_value": sum(sums[largest])})


def expiring_schedule(ws: Path, p: dict[str, Any]) -> None:
    rows = sorted(
        (r for r in _register(ws) if p["from"] <= str(r["Expiry"])[:10] <= p["to"]),
        key=lambda r: str(r["Expiry"]),
    )
    table = [
        [r["Contract ID"], r["Counterparty"], str(r["Expiry"])[:10], r["Annual Value (USD)"]]
        for r in rows
    ]
    table.append(["Total", "", "", sum(r["Annual Value (USD)"] for r in rows)])
    lib.write_table_xlsx(
        ws / "output" / "expiring_contracts.xlsx",
        "Expiring",
        ["Contract ID", "Counterparty", "Expiry", "Annual Value"],
        table,
    )
    lib.write_answer(ws, {"count": len(rows)})


def termination_memo(ws: Path, p: dict[str, Any]) -> None:
    days, expiry, deadline = _deadline(ws, p["counterparty"])
    lib.write_memo_docx(
        ws / "output" / "termination_memo.docx",
        p["heading"],
        [
            f"The agreement expires on {lib.iso(expiry)}.",
            f"notice period: {days} days",
            f"serve notice by: {lib.iso(deadline)}",
        ],
    )
    lib.write_answer(ws, {"notice_deadline": lib.iso(deadline)})


def starter_register_value(ws: Path, p: dict[str, Any]) -> None:
    row = next(r for r in _register(ws) if r["Contract ID"] == p["cid"])
    lib.write_answer(
        ws, {"counterparty": row["Counterparty"], "annual_value": row["Annual Value (USD)"]}
    )


def starter_executed_lookup(ws: Path, p: dict[str, Any]) -> None:
    """The one signed contract in contracts/executed/, found by listing the folder (its file
    name starts with the contract id), then looked up in the register."""
    signed = sorted((ws / "contracts" / "executed").glob("C-*.pdf"))
    if len(signed) != 1:
        raise ValueError(f"expected one signed contract in contracts/executed/, found {signed}")
    starter_register_value(ws, {"cid": signed[0].name.split("_", 1)[0]})


def starter_hearing_email(ws: Path, p: dict[str, Any]) -> None:
    lib.write_answer(ws, {"next_hearing": lib.iso(_hearing(ws, p["matter"]))})


SOLVERS = {
    "law.liability_cap": liability_cap,
    "law.liability_cap_unsupported": liability_cap,
    "law.fee_schedule": fee_schedule,
    "law.notice_current": notice_current,
    "law.register_total": register_total,
    "law.board_votes": board_votes,
    "law.nda_confidentiality": nda_confidentiality,
    "law.litigation_exposure": litigation_exposure,
    "law.expiring_schedule": expiring_schedule,
    "law.termination_memo": termination_memo,
    "law.termination_plan": termination_plan,
    "law.renewal_pipeline": renewal_pipeline,
    "law.starter_register_value": starter_register_value,
    "law.starter_hearing_email": starter_hearing_email,
    "law.starter_executed_lookup": starter_executed_lookup,
}
SOLVERS["law.brief"] = SOLVERS["law.brief_unseen"] = lambda ws, p: lib.solve_items(SOLVERS, ws, p)


def solve(params: dict[str, Any], workspace: Path) -> None:
    SOLVERS[params["template"]](workspace, params)


if __name__ == "__main__":
    lib.run_solver(SOLVERS, __doc__)
