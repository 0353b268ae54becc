"""Oracle solutions for investment-banking tasks.

Copied to a task's `solution/solve.py`. `params.json` names the template and what the question
states (a year, a peer tab, a sender and date); everything else is read from the workspace the way
an analyst would: the highest model version, the latest comps file, the final (not draft) deck,
and the deal emails in date order, where later offer revisions override the deck.
"""

from __future__ import annotations

import re
import statistics
from datetime import date
from pathlib import Path
from typing import Any

import openpyxl
import oracle_lib as lib

STATEMENT_LINES = {
    "revenue": ("IS", "Revenue"),
    "ebitda": ("IS", "EBITDA"),
    "net_income": ("IS", "Net income"),
    "fcf": ("CF", "Free cash flow"),
}
PROFILE = {
    "employees": r"employs ([\d,]+) people",
    "customers": r"serves ([\d,]+) active customers",
    "manufacturing_sites": r"across ([\d,]+) manufacturing sites",
    "countries": r"sold in ([\d,]+) countries",
    "recurring_revenue_pct": r"revenue made up ([\d.]+)% of FY2024",
}


# -- finding the current files ----------------------------------------------------------------
def _model(ws: Path) -> Path:
    """The highest-numbered version of the three-statement model."""
    versions = {
        int(re.search(r"_v(\d+)\.xlsx$", p.name).group(1)): p  # type: ignore[union-attr]
        for p in ws.glob("models/*_v*.xlsx")
    }
    return versions[max(versions)]


def _comps(ws: Path) -> Path:
    return max(ws.glob("comps/trading_comps_*.xlsx"), key=lambda p: p.name)


def _deck(ws: Path) -> Path:
    (deck,) = [p for p in ws.glob("decks/*.pptx") if "draft" not in p.name.lower()]
    return deck


def _one(ws: Path, pattern: str) -> Path:
    (path,) = sorted(ws.glob(pattern))
    return path


def _line(path: Path, sheet: str, label: str) -> dict[str, Any]:
    """One statement line as {column header: value}, found by its column-A label."""
    for record in lib.xlsx_records(path, sheet):
        if str(next(iter(record.values()))).strip().lower() == label.lower():
            return record
    raise ValueError(f"no line {label!r} on {sheet}")


def _year_value(record: dict[str, Any], year: str) -> float:
    return float(next(v for k, v in record.items() if k.startswith(year)))


# -- comps ------------------------------------------------------------------------------------
def _peers(ws: Path, tab: str, exclude: str | None) -> list[dict[str, Any]]:
    out = []
    for r in lib.xlsx_records(_comps(ws), tab):
        if not isinstance(r.get("Enterprise Value ($m)"), (int, float)) or r["Company"] == exclude:
            continue
        ev = float(r["Enterprise Value ($m)"])
        out.append(
            {
                "name": r["Company"],
                "ev_ebitda": ev / r["EBITDA ($m)"],
                "ev_revenue": ev / r["Revenue ($m)"],
            }
        )
    return out


def _median(ws: Path, tab: str, exclude: str | None, key: str = "ev_ebitda") -> float:
    return statistics.median(p[key] for p in _peers(ws, tab, exclude))


def _guidance_tab(ws: Path, sender: str, when: str) -> str:
    for mail in lib.read_mailbox(ws / "mail"):
        if sender in mail["from"] and lib.iso(mail["date"]) == when:
            m = re.search(r"use the (.+?) tab", lib.flat(mail["body"]))
            if m:
                return m.group(1)
    raise RuntimeError(f"no peer guidance from {sender} on {when}")


def _guidance_for(ws: Path, purpose: str) -> str:
    for mail in lib.read_mailbox(ws / "mail"):
        m = re.search(
            rf"For {re.escape(purpose)}, please use the (.+?) tab", lib.flat(mail["body"])
        )
        if m:
            return m.group(1)
    raise RuntimeError(f"no peer guidance for {purpose}")


def _outlier(ws: Path, tab: str) -> str:
    for msg in lib.read_chat(ws / "chat" / "deal-team.json"):
        m = re.search(rf"On the {re.escape(tab)} tab, leave out (.+?):", msg["text"])
        if m:
            return m.group(1)
    raise RuntimeError(f"no outlier flagged for {tab}")


def _implied(ws: Path, tab: str, exclude: str, year: str) -> dict[str, float]:
    med = _median(ws, tab, exclude)
    ebitda = _year_value(_line(_model(ws), "IS", "EBITDA"), year)
    ev = med * ebitda
    equity = ev - _net_debt(ws)
    shares = float(
        lib.xlsx_label_value(_one(ws, "merger/*.xlsx"), "Inputs", "Target diluted shares (m)")
    )
    return {
        "median_ev_ebitda": med,
        "ebitda": ebitda,
        "implied_ev": ev,
        "implied_equity_value": equity,
        "per_share": equity / shares,
    }


def _net_debt(ws: Path) -> float:
    return _year_value(_line(_model(ws), "BS", "Net debt"), "FY2024A")


# -- offer ------------------------------------------------------------------------------------
def _overview(ws: Path) -> str:
    slide = next(s for s in lib.pptx_slides(_deck(ws)) if s["title"] == "Transaction overview")
    return "\n".join(slide["texts"])


def _offer(ws: Path, as_of: date | None = None) -> tuple[float, float]:
    """(offer price, run-rate synergies) from the deck, updated by emails up to `as_of`."""
    text = _overview(ws)
    price = lib.number_after(text, "Offer price:")
    synergies = lib.number_after(text, "Run-rate synergies:")
    for mail in lib.read_mailbox(ws / "mail"):
        if as_of is not None and mail["date"].date() > as_of:
            break
        body = lib.flat(mail["body"])
        m = re.search(r"offer price is now \$([\d,.]+) per share", body)
        if m:
            price = lib.parse_number(m.group(1))
        m = re.search(r"run-rate synergies are now \$([\d,.]+)m", body)
        if m:
            synergies = lib.parse_number(m.group(1))
    return price, synergies


def _terms(ws: Path, price: float) -> dict[str, float]:
    text = _overview(ws)
    shares = lib.number_after(text, "Target diluted shares:")
    unaffected = lib.number_after(text, "unaffected share price of")
    equity = price * shares
    return {
        "offer_price": price,
        "equity_value": equity,
        "premium_pct": (price / unaffected - 1) * 100,
    }


def _accretion(ws: Path, price: float, synergies: float, year: int) -> dict[str, float]:
    path = _one(ws, "merger/*.xlsx")

    def inp(label: str) -> float:
        return float(lib.xlsx_label_value(path, "Inputs", label))

    def ad(label: str) -> float:
        return float(_line(path, "Accretion Dilution", label)[f"Year {year}"])

    stock, tax = inp("Stock consideration (%)"), inp("Tax rate (%)")
    acq_shares, acq_ni = inp("Acquirer shares outstanding (m)"), ad("Acquirer net income")
    equity = price * inp("Target diluted shares (m)")
    new_shares = equity * stock / inp("Acquirer share price ($)")
    interest = equity * (1 - stock) * inp("Pre-tax cost of new debt (%)") * (1 - tax)
    syn = synergies * ad("Synergy phase-in (%)") * (1 - tax)
    pf_eps = (acq_ni + ad("Target net income") + syn - interest) / (acq_shares + new_shares)
    sa_eps = acq_ni / acq_shares
    return {
        "new_shares": new_shares,
        "pro_forma_eps": pf_eps,
        "accretion_pct": (pf_eps / sa_eps - 1) * 100,
    }


# -- solvers ----------------------------------------------------------------------------------
def model_line_item(ws: Path, p: dict[str, Any]) -> None:
    model = _model(ws)
    years = [str(k) for k in _line(model, "IS", "Revenue")]
    if not any(y.startswith(p["year"]) for y in years[1:]):
        reason = f"No version of the model has {p['year']}; the current one ends at {years[-1]}."
        lib.write_answer(ws, {**dict.fromkeys(p["keys"]), "unsupported_reason": reason})
        return
    lib.write_answer(
        ws, {k: _year_value(_line(model, *STATEMENT_LINES[k]), p["year"]) for k in p["keys"]}
    )


def dcf_valuation(ws: Path, p: dict[str, Any]) -> None:
    model = _model(ws)
    wacc = float(lib.xlsx_named(model, "WACC")) * 100 + p["delta"]
    w, g = wacc / 100, float(lib.xlsx_named(model, "TerminalGrowth"))
    line = _line(model, "CF", "Free cash flow")
    fcf = [float(v) for k, v in line.items() if k.startswith("FY") and k.endswith("E")]
    pv = sum(x / (1 + w) ** t for t, x in enumerate(fcf, start=1))
    pv_tv = fcf[-1] * (1 + g) / (w - g) / (1 + w) ** len(fcf)
    lib.write_answer(
        ws, {"wacc_pct": wacc, "pv_fcf": pv, "pv_terminal": pv_tv, "enterprise_value": pv + pv_tv}
    )


def comps_stats(ws: Path, p: dict[str, Any]) -> None:
    multiples = [x["ev_ebitda"] for x in _peers(ws, p["tab"], p["exclude"])]
    lib.write_answer(
        ws,
        {
            "peer_count": len(multiples),
            "median_ev_ebitda": round(statistics.median(multiples), 2),
            "mean_ev_ebitda": round(statistics.fmean(multiples), 2),
        },
    )


def implied_value(ws: Path, p: dict[str, Any]) -> None:
    lib.write_answer(ws, _implied(ws, p["tab"], p["exclude"], p["year"]))


def peer_guidance(ws: Path, p: dict[str, Any]) -> None:
    tab = _guidance_tab(ws, p["sender"], p["date"])
    exclude = _outlier(ws, tab)
    implied = _implied(ws, tab, exclude, p["year"])
    lib.write_answer(
        ws,
        {
            "peer_tab": tab,
            "excluded_peer": exclude,
            "median_ev_ebitda": implied["median_ev_ebitda"],
            "implied_ev": implied["implied_ev"],
        },
    )


def revised_offer(ws: Path, p: dict[str, Any]) -> None:
    price, _ = _offer(ws, date.fromisoformat(p["as_of"]))
    terms = _terms(ws, price)
    terms["enterprise_value"] = terms["equity_value"] + _net_debt(ws)
    lib.write_answer(ws, terms)


def bid_deadline_terms(ws: Path, p: dict[str, Any]) -> None:
    (calendar,) = sorted(ws.glob("calendar/project_*_timetable.ics"))
    deadline = next(
        e["start"] for e in lib.ics_events(calendar) if e["SUMMARY"].endswith("final bid deadline")
    )
    price, _ = _offer(ws, deadline)
    terms = _terms(ws, price)
    ev = terms["equity_value"] + _net_debt(ws)
    ebitda = _year_value(_line(_model(ws), "IS", "EBITDA"), "FY2024A")
    lib.write_answer(
        ws,
        {
            "bid_deadline": lib.iso(deadline),
            "offer_price": price,
            "equity_value": terms["equity_value"],
            "enterprise_value": ev,
            "ev_ebitda": ev / ebitda,
        },
    )


def revised_accretion(ws: Path, p: dict[str, Any]) -> None:
    price, synergies = _offer(ws)
    result = _accretion(ws, price, synergies, p["year"])
    lib.write_answer(ws, {"offer_price": price, "synergies": synergies, **result})


def merger_accretion(ws: Path, p: dict[str, Any]) -> None:
    path = _one(ws, "merger/*.xlsx")
    col = f"Year {p['year']}"
    lib.write_answer(
        ws,
        {
            "offer_price": lib.xlsx_named(path, "OfferPrice"),
            "standalone_eps": _line(path, "Accretion Dilution", "Standalone EPS ($)")[col],
            "pro_forma_eps": _line(path, "Accretion Dilution", "Pro-forma EPS ($)")[col],
            "accretion_pct": _line(path, "Accretion Dilution", "Accretion / (dilution) (%)")[col]
            * 100,
        },
    )


def _ranges(ws: Path) -> dict[str, tuple[float, float]]:
    slide = next(s for s in lib.pptx_slides(_deck(ws)) if s["title"] == "Valuation summary")
    rows = slide["tables"][0][1:]
    return {r[0]: (lib.parse_number(r[1]), lib.parse_number(r[2])) for r in rows}


def valuation_range(ws: Path, p: dict[str, Any]) -> None:
    ranges = _ranges(ws)
    low, high = ranges[p["method"]]
    top = max(ranges, key=lambda m: ranges[m][1])
    lib.write_answer(
        ws, {"low": low, "high": high, "midpoint": (low + high) / 2, "highest_method": top}
    )


def cim_segment(ws: Path, p: dict[str, Any]) -> None:
    rows = lib.pdf_table_with(_one(ws, "cim/*_cim.pdf"), "FY2023")
    by_name = {r["Segment"]: r for r in rows}
    year = p["year"]
    prior = f"FY{int(year[2:]) - 1}"
    value = lib.parse_number(by_name[p["segment"]][year])
    total = lib.parse_number(by_name["Total"][year])
    before = lib.parse_number(by_name[p["segment"]][prior])
    lib.write_answer(
        ws,
        {
            "revenue": value,
            "share_pct": round(value / total * 100, 1),
            "growth_pct": round((value / before - 1) * 100, 1),
        },
    )


def cim_profile(ws: Path, p: dict[str, Any]) -> None:
    text = lib.flat(lib.pdf_text(_one(ws, "cim/*_cim.pdf")))
    answer = {}
    for key in p["keys"]:
        m = re.search(PROFILE[key], text)
        if m is None:
            raise RuntimeError(f"{key} not found in the CIM")
        answer[key] = lib.parse_number(m.group(1))
    lib.write_answer(ws, answer)


def comps_output(ws: Path, p: dict[str, Any]) -> None:
    peers = _peers(ws, p["tab"], p["exclude"])
    rows: list[list[Any]] = [
        [x["name"], round(x["ev_ebitda"], 2), round(x["ev_revenue"], 2)] for x in peers
    ]
    rows.append(
        [
            "Median",
            round(statistics.median(x["ev_ebitda"] for x in peers), 2),
            round(statistics.median(x["ev_revenue"] for x in peers), 2),
        ]
    )
    lib.write_table_xlsx(ws / p["path"], "Comps", ["Company", "EV/EBITDA", "EV/Revenue"], rows)
    lib.write_answer(ws, {"peer_count": len(peers)})


VALUATION_BOOK = "output/comps_valuation.xlsx"


def comps_valuation(ws: Path, p: dict[str, Any]) -> None:
    """Step `comps` writes the peers and their median; step `valuation` reads the median back
    from that workbook (the earlier step's deliverable) and adds the valuation sheet."""
    if p["step"] == "comps":
        peers = _peers(ws, p["tab"], p["exclude"])
        median = round(statistics.median(x["ev_ebitda"] for x in peers), 2)
        rows: list[list[Any]] = [[x["name"], round(x["ev_ebitda"], 2)] for x in peers]
        rows.append(["Median", median])
        lib.write_table_xlsx(ws / VALUATION_BOOK, "Comps", ["Company", "EV/EBITDA"], rows)
        lib.write_answer(ws, {"peer_count": len(peers), "median_ev_ebitda": median})
        return
    comps = lib.xlsx_records(ws / VALUATION_BOOK, "Comps")
    median = float(next(r["EV/EBITDA"] for r in comps if r["Company"] == "Median"))
    ebitda = _year_value(_line(_model(ws), "IS", "EBITDA"), p["year"])
    net_debt = _net_debt(ws)
    shares = float(
        lib.xlsx_label_value(_one(ws, "merger/*.xlsx"), "Inputs", "Target diluted shares (m)")
    )
    ev = median * ebitda
    equity = ev - net_debt
    values = [median, ebitda, ev, net_debt, equity, equity / shares]
    labels = ["Median EV/EBITDA", "EBITDA", "Enterprise Value", "Net Debt", "Equity Value"]
    wb = openpyxl.load_workbook(ws / VALUATION_BOOK)
    sheet = wb.create_sheet("Valuation")
    sheet.append(["Item", "Value"])
    for label, value in zip([*labels, "Per Share"], values, strict=True):
        sheet.append([label, value])
    wb.save(ws / VALUATION_BOOK)
    lib.write_answer(ws, {"implied_ev": ev, "per_share": equity / shares})


def deal_memo(ws: Path, p: dict[str, Any]) -> None:
    price, synergies = _offer(ws)
    answer: dict[str, Any] = {"offer_price": price}
    if p["kind"] == 0:
        terms = _terms(ws, price)
        lines = [
            f"offer price per share: {price:.2f}",
            f"implied equity value: {terms['equity_value']:.1f}",
            f"premium to unaffected price: {terms['premium_pct']:.1f}%",
        ]
    elif p["kind"] == 1:
        tab = _guidance_for(ws, p["purpose"])
        exclude = _outlier(ws, tab)
        med = _median(ws, tab, exclude)
        lines = [f"peer set: {tab}", f"excluded peer: {exclude}", f"median EV/EBITDA: {med:.2f}"]
        answer = {"median_ev_ebitda": round(med, 2)}
    else:
        deck_synergies = lib.number_after(_overview(ws), "Run-rate synergies:")
        lines = [
            f"board presentation synergies: {deck_synergies:.0f}",
            f"latest synergies: {synergies:.0f}",
            f"offer price per share: {price:.2f}",
        ]
    lib.write_memo_docx(ws / "output" / "deal_update_memo.docx", p["heading"], lines)
    lib.write_answer(ws, answer)


def starter_named_range(ws: Path, p: dict[str, Any]) -> None:
    model = _model(ws)
    lib.write_answer(ws, {n.lower(): float(lib.xlsx_named(model, n)) * 100 for n in p["names"]})


SOLVERS = {
    "banking.model_line_item": model_line_item,
    "banking.model_line_item_unsupported": model_line_item,
    "banking.dcf_valuation": dcf_valuation,
    "banking.comps_stats": comps_stats,
    "banking.implied_value": implied_value,
    "banking.peer_guidance": peer_guidance,
    "banking.revised_offer": revised_offer,
    "banking.revised_accretion": revised_accretion,
    "banking.bid_deadline_terms": bid_deadline_terms,
    "banking.merger_accretion": merger_accretion,
    "banking.valuation_range": valuation_range,
    "banking.cim_segment": cim_segment,
    "banking.cim_profile": cim_profile,
    "banking.comps_output": comps_output,
    "banking.deal_memo": deal_memo,
    "banking.comps_valuation": comps_valuation,
    "banking.starter_named_range": starter_named_range,
}


def brief(ws: Path, p: dict[str, Any]) -> None:
    """A brief's items, each by its own template's solver (`bureau.worlds.briefs`)."""
    lib.solve_items(SOLVERS, ws, p)


SOLVERS["banking.brief"] = SOLVERS["banking.brief_unseen"] = brief


def solve(params: dict[str, Any], workspace: Path) -> None:
    SOLVERS[params["template"]](workspace, params)


if __name__ == "__main__":
    lib.run_solver(SOLVERS, __doc__)
