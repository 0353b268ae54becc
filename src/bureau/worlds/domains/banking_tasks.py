"""Investment banking task templates: each turns the deal's facts into one question.

Questions name what an analyst would be told (a fiscal year, a peer tab, who sent an email and
when); the oracle finds everything else in the files. Numbers that must be rounded say how, and
their tolerances cover either rounding path.
"""

from __future__ import annotations

import random
import statistics
from typing import Any

from ..briefs import brief_templates
from ..fabric import day, long_date, slug
from ..spec import (
    PdfProbe,
    TaskSpec,
    Template,
    file_exists,
    judge,
    mentions,
    numeric,
    phrasing,
    text,
    unsupported,
    xlsx_cell,
)
from ..spec import docx_content as docx_has
from .banking_files import FIGURES, HIST_YEARS, TABS, BankFacts, Offer, timetable_file


def _pick(items: list[Any], variant: int) -> Any:
    return items[variant % len(items)]


def _tie(value: float, digits: int) -> bool:
    """True when `value` sits so near a rounding midpoint that the rounded form is ambiguous."""
    scaled = abs(value) * 10**digits
    return abs(scaled - int(scaled) - 0.5) < 0.02


def _where(f: BankFacts, rel: str) -> str:
    return f" (`{rel}`)" if f.ctx.difficulty == "starter" else ""


def _median(f: BankFacts, tab: str, exclude: str | None, attr: str = "ev_ebitda") -> float:
    return statistics.median(getattr(p, attr) for p in f.comps[tab] if p.name != exclude)


def t_line_item(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    return _line_item(f, rng, _pick(f.model.years, variant))


def t_line_item_unsupported(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    """The same request for a year one or two past the model's last projection: no version of
    the model has it."""
    last = int(f.model.years[-1][2:6])
    return _line_item(f, rng, f"FY{last + 1 + variant % 2}E")


def _line_item(f: BankFacts, rng: random.Random, year: str) -> TaskSpec:
    keys = ["revenue", "ebitda", "net_income"] + ([] if f.ctx.difficulty == "starter" else ["fcf"])
    modelled = year in f.model.years
    gold: dict[str, Any] = {k: round(f.model.value(k, year), 4) if modelled else None for k in keys}
    names = dict(revenue="Revenue", ebitda="EBITDA", net_income="Net income", fcf="Free cash flow")
    items = (
        "revenue, EBITDA, net income and free cash flow"
        if "fcf" in keys
        else "revenue, EBITDA and net income"
    )
    older = " Older versions do not count." if "fcf" in keys else ""
    target, model = f.target, _where(f, f.model_file)
    question = phrasing(
        rng,
        [
            f"From the current three-statement model of {target}{model}, what are {year} "
            f"{items}?{older}",
            f"What {year} {items} does the current three-statement model of {target}{model} "
            f"show?{older}",
            f"Please pull {target}'s {year} {items} from the current three-statement model"
            f"{model}.{older}",
        ],
    )
    title = phrasing(
        rng,
        [f"{target} {year} financials from the model", f"Three-statement model: {target} {year}"],
    )
    answer_keys = {k: f"number, {names[k]} for {year} in $m" for k in keys}
    if not modelled:
        return TaskSpec(
            template="banking.model_line_item_unsupported",
            kind="fact",
            title=title,
            question=question,
            answer_keys=answer_keys,
            criteria=[unsupported(k, f"Gives no {year} {names[k]}") for k in keys]
            + [mentions([[year, year[:-1]]], f"Says the model has no {year}")],
            gold=gold,
            oracle={"year": year, "keys": keys},
            signature=f"line:{year}",
            evidence=[f.model_file],
            infeasible=True,
        )
    return TaskSpec(
        template="banking.model_line_item",
        kind="fact",
        title=title,
        question=question,
        answer_keys=answer_keys,
        criteria=[numeric(k, v, f"States {year} {names[k]}") for k, v in gold.items()],
        gold=gold,
        oracle={"year": year, "keys": keys},
        signature=f"line:{year}",
    )


def t_dcf(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    delta = _pick([0.0, -0.5, 0.5, -1.0, 1.0], variant)
    m = f.model
    wacc = m.wacc + delta
    fcf = [m.value("fcf", y) for y in m.years if y.endswith("E")]
    w, g = wacc / 100, m.tg / 100
    pv = sum(x / (1 + w) ** t for t, x in enumerate(fcf, start=1))
    pv_tv = fcf[-1] * (1 + g) / (w - g) / (1 + w) ** len(fcf)
    how = (
        "at the model's WACC"
        if delta == 0
        else f"at the model's WACC {delta:+.1f} percentage points"
    )
    gold = {"wacc_pct": wacc, "pv_fcf": pv, "pv_terminal": pv_tv, "enterprise_value": pv + pv_tv}
    target = f.target
    question = phrasing(
        rng,
        [
            f"Run a quick DCF of {target} off the current three-statement model {how}. Use "
            "the model's named ranges WACC and TerminalGrowth and the free cash flow of each "
            "projected year (columns ending in E), discounted at the end of each year (the first "
            "projected year is year 1). The terminal value is the last projected free cash flow "
            "grown one year at the terminal growth rate and capitalised at (WACC - growth), "
            "discounted with the last projected year's factor.",
            f"Value {target} with a quick DCF {how}, off the current three-statement model. "
            "Take WACC and TerminalGrowth from the model's named ranges, and discount the free "
            "cash flow of each projected year (the columns ending in E) at the end of each "
            "year, the first projected year being year 1. For the terminal value, grow the last "
            "projected free cash flow one year at the terminal growth rate, capitalise it at "
            "(WACC - growth) and discount it with the last projected year's factor.",
            f"I need a quick DCF of {target} {how}, run off the current three-statement model. "
            "Inputs: the model's named ranges WACC and TerminalGrowth, and the free cash flow "
            "of each projected year (columns ending in E). Discount each year's free cash flow "
            "at the end of that year (the first projected year is year 1). Terminal value: the "
            "last projected free cash flow grown one year at the terminal growth rate and "
            "capitalised at (WACC - growth), discounted with the last projected year's factor.",
        ],
    )
    title = phrasing(rng, [f"DCF of {target} {how}", f"Quick DCF valuation of {target} {how}"])
    return TaskSpec(
        template="banking.dcf_valuation",
        kind="compute",
        title=title,
        question=question,
        answer_keys={
            "wacc_pct": "number, the discount rate used, in percent (e.g. 8.75)",
            "pv_fcf": "number, sum of the present values of projected free cash flow, $m",
            "pv_terminal": "number, present value of the terminal value, $m",
            "enterprise_value": "number, the DCF enterprise value, $m",
        },
        criteria=[
            numeric(
                "wacc_pct", wacc, "Uses the model's WACC with the stated change", abs_tol=0.006
            ),
            numeric("pv_fcf", pv, "Discounts the projected free cash flows"),
            numeric("pv_terminal", pv_tv, "Values the terminal year"),
            numeric("enterprise_value", pv + pv_tv, "Adds up the enterprise value"),
        ],
        gold=gold,
        oracle={"delta": delta},
        signature=f"dcf:{delta}",
    )


def t_comps_stats(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    tab = _pick(list(TABS), variant)
    peers = f.comps[tab]
    drop = f.outliers[tab] if variant < 2 else _pick(peers, variant // 2 + rng.randint(0, 5)).name
    kept = [p.ev_ebitda for p in peers if p.name != drop]
    med, mean = statistics.median(kept), statistics.fmean(kept)
    comps = _where(f, f.comps_file)
    question = phrasing(
        rng,
        [
            f"Using the {tab} tab of the latest trading comps workbook{comps}, compute each "
            f"peer's EV/EBITDA from its enterprise value and EBITDA, leave out {drop}, and give "
            "the median and mean multiple of the rest, each rounded to 2 decimals. The "
            "workbook's own summary rows include every peer.",
            f"On the {tab} tab of the latest trading comps workbook{comps}, work out each "
            f"peer's EV/EBITDA from its enterprise value and EBITDA. Leaving out {drop}, what "
            "are the median and the mean multiple of the rest, each rounded to 2 decimals? Note "
            "that the workbook's own summary rows include every peer.",
            f"Take the {tab} tab of the latest trading comps workbook{comps} and leave out "
            f"{drop}. For the rest, compute each peer's EV/EBITDA from its enterprise value and "
            "EBITDA, and give the median and the mean multiple, each rounded to 2 decimals. "
            "Mind that the workbook's own summary rows include every peer.",
        ],
    )
    title = phrasing(
        rng,
        [
            f"EV/EBITDA of the {tab} excluding {drop}",
            f"{tab} comps: median and mean EV/EBITDA without {drop}",
        ],
    )
    return TaskSpec(
        template="banking.comps_stats",
        kind="compute",
        title=title,
        question=question,
        answer_keys={
            "peer_count": "number of peers used",
            "median_ev_ebitda": "number, median EV/EBITDA, 2 decimals",
            "mean_ev_ebitda": "number, mean EV/EBITDA, 2 decimals",
        },
        criteria=[
            numeric("peer_count", len(kept), "Counts the peers used"),
            numeric("median_ev_ebitda", med, "Median multiple", abs_tol=0.006),
            numeric("mean_ev_ebitda", mean, "Mean multiple", abs_tol=0.006),
        ],
        gold={"peer_count": len(kept), "median_ev_ebitda": med, "mean_ev_ebitda": mean},
        oracle={"tab": tab, "exclude": drop},
        signature=f"comps:{tab}:{drop}",
    )


def _implied(f: BankFacts, tab: str, year: str) -> dict[str, float]:
    med = _median(f, tab, f.outliers[tab])
    ebitda = f.model.value("ebitda", year)
    ev = med * ebitda
    return {
        "median_ev_ebitda": med,
        "ebitda": ebitda,
        "implied_ev": ev,
        "implied_equity_value": ev - f.net_debt,
        "per_share": (ev - f.net_debt) / f.shares,
    }


def t_implied(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    tab = _pick(list(TABS), variant)
    year = _pick([y for y in f.model.years if y.endswith("E")], variant // 2)
    gold = _implied(f, tab, year)
    target, drop = f.target, f.outliers[tab]
    question = phrasing(
        rng,
        [
            f"Value {target} on trading comps: take the median EV/EBITDA of the {tab} tab of "
            f"the latest comps workbook, leaving out {drop}, and apply it (unrounded) "
            f"to {year} EBITDA from the current three-statement model. Subtract net debt at "
            "FY2024A from the model's balance sheet to get equity value, and divide by the "
            "target's diluted shares in the merger model.",
            f"What is {target} worth on trading comps? Apply the median EV/EBITDA of the {tab} "
            f"tab of the latest comps workbook, leaving out {drop}, unrounded, to {year} EBITDA "
            "from the current three-statement model. Subtract net debt at FY2024A from the "
            "model's balance sheet to get equity value, then divide by the target's diluted "
            "shares in the merger model.",
            f"Please run a trading comps valuation of {target}. On the {tab} tab of the latest "
            f"comps workbook, leave out {drop} and apply the median EV/EBITDA of the rest "
            f"(unrounded) to {year} EBITDA from the current three-statement model. Bridge to "
            "equity value by subtracting net debt at FY2024A from the model's balance sheet, "
            "and divide by the target's diluted shares in the merger model.",
        ],
    )
    title = phrasing(
        rng,
        [
            f"Implied value of {target} at the {tab} median",
            f"{target} valued at the {tab} median EV/EBITDA",
        ],
    )
    return TaskSpec(
        template="banking.implied_value",
        kind="compute",
        title=title,
        question=question,
        answer_keys={
            "median_ev_ebitda": "number, the median multiple, 2 decimals",
            "ebitda": f"number, {year} EBITDA, $m",
            "implied_ev": "number, implied enterprise value, $m",
            "implied_equity_value": "number, implied equity value, $m",
            "per_share": "number, implied value per share, $",
        },
        criteria=[
            numeric("median_ev_ebitda", gold["median_ev_ebitda"], "Median multiple", abs_tol=0.006),
            numeric("ebitda", gold["ebitda"], f"Uses {year} EBITDA of the current model"),
            numeric("implied_ev", gold["implied_ev"], "Implied enterprise value"),
            numeric(
                "implied_equity_value",
                gold["implied_equity_value"],
                "Bridges to equity",
                rel_tol=2e-3,
            ),
            numeric("per_share", gold["per_share"], "Value per share", rel_tol=2e-3),
        ],
        gold=gold,
        oracle={"tab": tab, "exclude": f.outliers[tab], "year": year},
        signature=f"implied:{tab}:{year}",
    )


def t_guidance(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    who, when, purpose, tab = _pick(f.guidance, variant)
    year = _pick([y for y in f.model.years if y.endswith("E")], variant // 2)
    gold = _implied(f, tab, year)
    sent, target = long_date(when), f.target
    question = phrasing(
        rng,
        [
            f"On {sent}, {who.name} emailed the team which peer tab of the trading "
            f"comps to use for {purpose}. Using that tab of the latest comps workbook, without "
            "the peer that #deal-team flagged as the outlier on that tab, what is the median "
            f"EV/EBITDA, and what enterprise value does it imply for {target} on {year} EBITDA "
            "from the current three-statement model (apply the unrounded median)?",
            f"{who.name} emailed the team on {sent} to say which peer tab of the trading comps "
            f"to use for {purpose}. On that tab of the latest comps workbook, leaving out the "
            "peer that #deal-team flagged as the outlier on that tab, what is the median "
            "EV/EBITDA? And what enterprise value does the unrounded median imply for "
            f"{target} on {year} EBITDA from the current three-statement model?",
            f"Follow the guidance {who.name} emailed the team on {sent} on which peer tab of "
            f"the trading comps to use for {purpose}. Take that tab of the latest comps "
            "workbook, drop the peer that #deal-team flagged as the outlier on that tab, and "
            "give the median EV/EBITDA and the enterprise value it implies for "
            f"{target} on {year} EBITDA from the current three-statement model (apply the "
            "median unrounded).",
        ],
    )
    title = phrasing(
        rng,
        [
            f"Comps valuation for {purpose}",
            f"Peer tab for {purpose}: median EV/EBITDA and implied value",
        ],
    )
    return TaskSpec(
        template="banking.peer_guidance",
        kind="multi_hop",
        title=title,
        question=question,
        answer_keys={
            "peer_tab": "string, the name of the tab used",
            "excluded_peer": "string, the peer left out",
            "median_ev_ebitda": "number, median EV/EBITDA, 2 decimals",
            "implied_ev": "number, implied enterprise value, $m",
        },
        criteria=[
            text("peer_tab", tab, "Follows the email's peer tab"),
            text("excluded_peer", f.outliers[tab], "Leaves out the flagged outlier"),
            numeric("median_ev_ebitda", gold["median_ev_ebitda"], "Median multiple", abs_tol=0.006),
            numeric("implied_ev", gold["implied_ev"], "Implied enterprise value"),
        ],
        gold={**gold, "peer_tab": tab, "excluded_peer": f.outliers[tab]},
        oracle={"sender": who.name, "date": when.isoformat(), "year": year},
        signature=f"guidance:{tab}:{year}",
    )


def _offer_terms(f: BankFacts, offer: Offer) -> dict[str, float]:
    equity = offer.price * f.shares
    return {
        "offer_price": offer.price,
        "equity_value": equity,
        "premium_pct": (offer.price / f.unaffected - 1) * 100,
        "enterprise_value": equity + f.net_debt,
    }


PHRASES = {
    "equity_value": "equity value",
    "premium_pct": "premium to the unaffected share price",
    "enterprise_value": "enterprise value",
}


def t_revised_offer(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    starter = f.ctx.difficulty == "starter"
    as_of = f.latest.since if starter or variant % 2 == 0 else day(f.offers[1].since, 5)
    offer = f.offer_on(as_of)
    terms = _offer_terms(f, offer)
    ask = _pick(
        [
            ["equity_value", "premium_pct"],
            ["equity_value", "enterprise_value"],
            ["premium_pct", "enterprise_value"],
        ],
        variant // 2,
    )
    if starter:
        ask = ask[:1]
    desc = {
        "equity_value": (
            "number, offer price times the target's diluted shares, $m",
            "Implied equity value at that offer",
        ),
        "premium_pct": (
            "number, premium to the unaffected share price, %, 1 decimal",
            "Premium to the unaffected price",
        ),
        "enterprise_value": (
            "number, equity value plus FY2024A net debt from the current three-statement model, $m",
            "Implied enterprise value",
        ),
    }
    when = "now stands" if as_of == f.latest.since else f"stood on {long_date(as_of)}"
    where = f" The revision is in `{f.offers[1].mail}`." if starter else ""
    criteria = [numeric("offer_price", offer.price, "Uses the offer price in force")]
    for key in ask:
        tol = 0.06 if key == "premium_pct" else 0.01
        criteria.append(numeric(key, terms[key], desc[key][1], abs_tol=tol))
    code, target, deck = f.code, f.target, _where(f, f.deck_file)
    asked = " and ".join(PHRASES[k] for k in ask)
    inputs = (
        "the unaffected share price and the target's diluted share count from the board "
        "presentation's transaction overview"
    )
    question = phrasing(
        rng,
        [
            f"The board presentation for Project {code}{deck} shows an offer price for "
            f"{target}, but the offer has moved since.{where} What is the offer price per "
            f"share as it {when}, and what {asked} does it imply? Take {inputs}.",
            f"The offer for {target} has moved since the board presentation for Project "
            f"{code}{deck} showed its offer price.{where} What is the offer price per share as "
            f"it {when}, and what {asked} does that price imply? Use {inputs}.",
            f"Project {code}: the board presentation{deck} shows an offer price for {target}, "
            f"but the offer has moved since then.{where} Give the offer price per share as it "
            f"{when} and the {asked} it implies, taking {inputs}.",
        ],
    )
    title = phrasing(
        rng,
        [f"Project {code} offer as it {when}", f"Project {code}: offer terms as the offer {when}"],
    )
    return TaskSpec(
        template="banking.revised_offer",
        kind="reconcile",
        title=title,
        question=question,
        answer_keys={
            "offer_price": "number, offer price per share in $",
            **{k: desc[k][0] for k in ask},
        },
        criteria=criteria,
        gold={k: terms[k] for k in ["offer_price", *ask]},
        oracle={"as_of": as_of.isoformat()},
        signature=f"offer:{as_of}:{'+'.join(ask)}",
    )


def t_revised_accretion(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    k = variant % 3
    offer = f.latest
    ad = f.merger.run(offer.price, offer.synergies, f.shares, k)
    code, n = f.code, k + 1
    inputs = "(consideration mix, cost of debt, tax rate, phase-in, net incomes, share counts)"
    outputs = (
        "pro-forma EPS rounded to 2 decimals and accretion / (dilution) in percent to 1 "
        "decimal, computed from unrounded EPS (negative for dilution)"
    )
    question = phrasing(
        rng,
        [
            f"The merger model for Project {code} still runs at the board presentation's offer "
            f"price and synergies. Rerun year {n} at the latest offer price and run-rate "
            "synergies from the deal emails, keeping every other merger-model input "
            f"{inputs}. Report new shares issued, {outputs}.",
            f"Project {code}'s merger model is still set to the board presentation's offer "
            "price and synergies. Rerun year "
            f"{n} with the latest offer price and run-rate synergies from the deal emails, "
            f"keeping every other merger-model input as it is {inputs}. What are the new "
            f"shares issued, the {outputs}?",
            f"Rerun year {n} of the Project {code} merger model at the latest terms: the model "
            "still runs at the board presentation's offer price and synergies, so use the "
            "latest offer price and run-rate synergies from the deal emails instead, and keep "
            f"every other merger-model input {inputs}. Report the new shares issued, {outputs}.",
        ],
    )
    title = phrasing(
        rng,
        [
            f"Year {n} accretion / dilution at the latest terms",
            f"Project {code}: year {n} accretion / dilution rerun at the latest terms",
        ],
    )
    return TaskSpec(
        template="banking.revised_accretion",
        kind="reconcile",
        title=title,
        question=question,
        answer_keys={
            "offer_price": "number, the latest offer price per share, $",
            "synergies": "number, the latest run-rate synergies, $m",
            "new_shares": "number, new acquirer shares issued, millions",
            "pro_forma_eps": "number, pro-forma EPS, $, 2 decimals",
            "accretion_pct": "number, accretion (dilution negative), %, 1 decimal",
        },
        criteria=[
            numeric("offer_price", offer.price, "Uses the latest offer price"),
            numeric("synergies", offer.synergies, "Uses the latest synergies"),
            numeric("new_shares", ad["new_shares"], "New shares at the latest price"),
            numeric("pro_forma_eps", ad["pf_eps"], "Pro-forma EPS", abs_tol=0.006),
            numeric("accretion_pct", ad["accretion"], "Accretion / dilution", abs_tol=0.06),
        ],
        gold={"offer_price": offer.price, "synergies": offer.synergies, **ad},
        oracle={"year": k + 1},
        signature=f"reaccretion:{k}",
    )


def t_bid_deadline(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    """Four files of four kinds: the deal timetable (the deadline, moved since an older reminder
    gave it with the deck's offer), the revision email in force that day (not the later one),
    the board presentation (diluted shares) and the current model (net debt, EBITDA)."""
    when = f.bid_deadline
    if when is None:
        return None
    offer = f.offer_on(when)
    equity = offer.price * f.shares
    ev = equity + f.net_debt
    ebitda = f.model.value("ebitda", "FY2024A")
    code, target = f.code, f.target
    rules = (
        "An email from the deal team that revises the offer applies from the day it was sent; "
        "the highest-numbered version of the three-statement model is the current one; drafts "
        "do not count; the deal timetable calendar shows the current dates."
    )
    question = phrasing(
        rng,
        [
            f"Project {code}: on the final bid deadline, as the deal timetable now shows it, "
            f"what offer price per share for {target} is in force, what equity value does it "
            "imply (price times the target's diluted shares in the board presentation), what "
            "enterprise value (that equity value plus FY2024A net debt from the current "
            "three-statement model), and what multiple of FY2024A EBITDA is that? " + rules,
            f"{f.cfo.name} ({f.cfo.title}) asks where the offer for {target} stands on Project "
            f"{code}'s final bid deadline (the day the deal timetable now gives): the offer "
            "price per share then in force, the equity value at that price (times the target's "
            "diluted shares in the board presentation), the enterprise value (plus FY2024A net "
            "debt from the current three-statement model) and that enterprise value as a "
            "multiple of FY2024A EBITDA. " + rules,
            f"Give the terms of the offer for {target} as they stand on the final bid deadline "
            f"of Project {code} in the deal timetable: price per share in force, implied "
            "equity value (price times the diluted shares in the board presentation), "
            "enterprise value (equity value plus the current three-statement model's FY2024A "
            "net debt), and enterprise value over FY2024A EBITDA. " + rules,
        ],
    )
    title = phrasing(
        rng,
        [f"Project {code}: the offer at the bid deadline", f"Project {code} bid-deadline terms"],
    )
    gold = {
        "bid_deadline": when.isoformat(),
        "offer_price": offer.price,
        "equity_value": equity,
        "enterprise_value": ev,
        "ev_ebitda": ev / ebitda,
    }
    return TaskSpec(
        template="banking.bid_deadline_terms",
        kind="reconcile",
        title=title,
        question=question,
        answer_keys={
            "bid_deadline": "date, the final bid deadline",
            "offer_price": "number, $ per share",
            "equity_value": "number, $m",
            "enterprise_value": "number, $m",
            "ev_ebitda": "number, the multiple (e.g. 9.4 for 9.4x)",
        },
        criteria=[
            text("bid_deadline", when.isoformat(), "Uses the timetable's current deadline"),
            numeric("offer_price", offer.price, "Uses the offer in force on that day"),
            numeric("equity_value", equity, "Computes the equity value", rel_tol=2e-3),
            numeric("enterprise_value", ev, "Adds the current model's net debt", rel_tol=2e-3),
            numeric("ev_ebitda", ev / ebitda, "Divides by FY2024A EBITDA", rel_tol=5e-3),
        ],
        gold=gold,
        oracle={},
        signature="bid_deadline",
        evidence=[timetable_file(f), offer.mail, f.deck_file, f.model_file],
    )


def t_merger(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    k = variant % 3
    ad = f.merger.run(f.offers[0].price, f.offers[0].synergies, f.shares, k)
    code, n = f.code, k + 1
    question = phrasing(
        rng,
        [
            f"What does the Project {code} merger model show for year {n}: the offer price "
            "it runs at, the acquirer's standalone EPS, pro-forma EPS and accretion / (dilution)?",
            f"From the Project {code} merger model, for year {n}: what offer price does the "
            "model run at, and what are the acquirer's standalone EPS, pro-forma EPS and "
            "accretion / (dilution)?",
            f"Look at year {n} in the Project {code} merger model and give the offer price it "
            "runs at, the acquirer's standalone EPS, the pro-forma EPS and the accretion / "
            "(dilution).",
        ],
    )
    title = phrasing(
        rng,
        [
            f"Merger model: year {n} accretion / dilution",
            f"Project {code} merger model, year {n}: EPS and accretion / dilution",
        ],
    )
    return TaskSpec(
        template="banking.merger_accretion",
        kind="fact",
        title=title,
        question=question,
        answer_keys={
            "offer_price": "number, the model's offer price per share, $",
            "standalone_eps": "number, standalone EPS, $, 2 decimals",
            "pro_forma_eps": "number, pro-forma EPS, $, 2 decimals",
            "accretion_pct": "number, accretion (dilution negative), %, 1 decimal",
        },
        criteria=[
            numeric("offer_price", f.offers[0].price, "Reads the model's offer price"),
            numeric("standalone_eps", ad["sa_eps"], "Standalone EPS", abs_tol=0.006),
            numeric("pro_forma_eps", ad["pf_eps"], "Pro-forma EPS", abs_tol=0.006),
            numeric("accretion_pct", ad["accretion"], "Accretion / dilution", abs_tol=0.06),
        ],
        gold={"offer_price": f.offers[0].price, **ad},
        oracle={"year": k + 1},
        signature=f"accretion:{k}",
    )


def t_range(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    method, low, high = _pick(f.methods, variant)
    top = max(f.methods, key=lambda m: m[2])[0]
    code = f.code
    question = phrasing(
        rng,
        [
            f"In the final board presentation for Project {code} (not the draft), what range "
            f"of value per share does the football field give for {method}, and what is its "
            "midpoint? Which methodology reaches the highest value per share?",
            f"Using the final board presentation for Project {code}, not the draft: what range "
            f"of value per share does the football field show for {method}, what is the "
            "midpoint of that range, and which methodology reaches the highest value per share?",
            f"The football field in the final Project {code} board presentation (not the "
            f"draft) gives ranges of value per share. What is the range for {method} and its "
            "midpoint, and which methodology reaches the highest value per share?",
        ],
    )
    title = phrasing(
        rng, [f"Football field: {method}", f"Project {code} football field: {method} range"]
    )
    return TaskSpec(
        template="banking.valuation_range",
        kind="fact",
        title=title,
        question=question,
        answer_keys={
            "low": "number, low end, $ per share",
            "high": "number, high end, $ per share",
            "midpoint": "number, midpoint of the range, $ per share",
            "highest_method": "string, methodology with the highest high end",
        },
        criteria=[
            numeric("low", low, "Low end of the range"),
            numeric("high", high, "High end of the range"),
            numeric("midpoint", (low + high) / 2, "Midpoint"),
            text("highest_method", top, "Names the methodology with the highest value"),
        ],
        gold={"low": low, "high": high, "midpoint": (low + high) / 2, "highest_method": top},
        oracle={"method": method},
        signature=f"range:{method}",
    )


def t_segment(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    names = sorted(f.segments)
    seg = _pick(names, variant)
    j = 1 + (variant // len(names) + rng.randint(0, 1)) % 2
    year = HIST_YEARS[j]
    value = f.segments[seg][j]
    total = sum(v[j] for v in f.segments.values())
    share = value / total * 100
    growth = (value / f.segments[seg][j - 1] - 1) * 100
    starter = f.ctx.difficulty == "starter"
    criteria = [
        numeric("revenue", value, f"{seg} revenue in {year}"),
        numeric("share_pct", share, "Share of total revenue", abs_tol=0.06),
    ]
    keys = {
        "revenue": f"number, {seg} revenue in {year}, $m",
        "share_pct": "number, its share of total revenue that year, %, 1 decimal",
    }
    if not starter:
        criteria.append(numeric("growth_pct", growth, "Growth on the prior year", abs_tol=0.06))
        keys["growth_pct"] = f"number, growth on {HIST_YEARS[j - 1]}, %, 1 decimal"
    code, cim, prior = f.code, _where(f, f.cim_file), HIST_YEARS[j - 1]
    also = (
        "its share of total revenue"
        if starter
        else f"its share of total revenue and its growth on {prior}"
    )
    question = phrasing(
        rng,
        [
            f"According to the historical financials by segment in the Project {code} CIM"
            f"{cim}, what was {seg} revenue in {year}"
            + (
                " and its share of total revenue?"
                if starter
                else f", its share of total revenue and its growth on {prior}?"
            ),
            f"What was {seg} revenue in {year}, according to the historical financials by "
            f"segment in the Project {code} CIM{cim}? Also give {also}.",
            f"Look up {seg} in the historical financials by segment in the Project {code} CIM"
            f"{cim} and give its revenue in {year}, with {also}.",
        ],
    )
    title = phrasing(rng, [f"CIM: {seg} revenue in {year}", f"{seg} revenue in {year} per the CIM"])
    return TaskSpec(
        template="banking.cim_segment",
        kind="fact",
        title=title,
        question=question,
        answer_keys=keys,
        criteria=criteria,
        gold={"revenue": value, "share_pct": share, "growth_pct": growth},
        oracle={"segment": seg, "year": year},
        signature=f"segment:{seg}:{year}",
        pdf_probe=PdfProbe(f.cim_file, seg, value, "table"),
    )


def t_profile(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    keys = sorted(rng.sample(sorted(FIGURES), 3), key=list(FIGURES).index)
    first = keys[variant % 3]
    code, target = f.code, f.target
    items = "; ".join(FIGURES[k][1] for k in keys)
    question = phrasing(
        rng,
        [
            f"From the business description in the Project {code} CIM, what are these "
            f"figures for {target}: {items}?",
            f"What does the business description in the Project {code} CIM give for these "
            f"figures for {target}: {items}?",
            f"Please pull these figures for {target} from the business description in the "
            f"Project {code} CIM: {items}.",
        ],
    )
    title = phrasing(
        rng, [f"{target} profile from the CIM", f"CIM business description: {target} figures"]
    )
    return TaskSpec(
        template="banking.cim_profile",
        kind="fact",
        title=title,
        question=question,
        answer_keys={k: f"number, the {FIGURES[k][1]}" for k in keys},
        criteria=[numeric(k, f.figures[k], f"States the {FIGURES[k][1]}") for k in keys],
        gold={k: f.figures[k] for k in keys},
        oracle={"keys": keys},
        signature=f"profile:{'+'.join(keys)}",
        pdf_probe=PdfProbe(f.cim_file, FIGURES[first][0], f.figures[first], "two_column"),
    )


def t_comps_output(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    tab = _pick(list(TABS), variant)
    exclude = f.outliers[tab] if variant % 4 < 2 else None
    peers = [p for p in f.comps[tab] if p.name != exclude]
    path = f"output/comps_{slug(tab).replace('-', '_')}.xlsx"
    med = _median(f, tab, exclude)
    med_rev = _median(f, tab, exclude, "ev_revenue")
    criteria = [file_exists(path, "Produces the comps workbook")]
    criteria += [
        xlsx_cell(
            path,
            "Comps",
            round(p.ev_ebitda, 2),
            f"EV/EBITDA of {p.name}",
            row_label=p.name,
            column="EV/EBITDA",
        )
        for p in rng.sample(peers, 3)
    ]
    criteria += [
        xlsx_cell(
            path, "Comps", med, "Median EV/EBITDA row", row_label="Median", column="EV/EBITDA"
        ),
        xlsx_cell(
            path, "Comps", med_rev, "Median EV/Revenue row", row_label="Median", column="EV/Revenue"
        ),
        numeric("peer_count", len(peers), "Counts the peers in the output"),
    ]
    left = f", leaving out {exclude}" if exclude else ", every peer on the tab"
    keep = f"leave out {exclude}" if exclude else "keep every peer on the tab"
    scope = f"leaving out {exclude}" if exclude else "with every peer on the tab"
    question = phrasing(
        rng,
        [
            f"Prepare a clean comps output for the {tab} tab of the latest trading comps "
            f"workbook{left}: each peer's EV/EBITDA and EV/Revenue computed from enterprise "
            "value, EBITDA and revenue, and the median of each multiple.",
            f"Build a clean comps output from the {tab} tab of the latest trading comps "
            f"workbook and {keep}. For each peer, compute EV/EBITDA and EV/Revenue from "
            "enterprise value, EBITDA and revenue, and add the median of each multiple.",
            f"The team needs a clean comps output for the {tab} tab of the latest trading comps "
            f"workbook, {scope}: each peer's EV/EBITDA and EV/Revenue, computed from enterprise "
            "value, EBITDA and revenue, plus the median of each multiple.",
        ],
    )
    title = phrasing(rng, [f"Comps output: {tab}", f"Clean comps output for the {tab} tab"])
    return TaskSpec(
        template="banking.comps_output",
        kind="deliverable",
        title=title,
        question=question,
        answer_keys={"peer_count": "number of peers in the output"},
        deliverables={
            path: (
                'a workbook with a sheet named "Comps". Row 1 holds the headers "Company", '
                '"EV/EBITDA", "EV/Revenue"; one row per peer follows (company name in column A, '
                'multiples as numbers rounded to 2 decimals); then a row with "Median" in column '
                "A and the median of each multiple."
            )
        },
        criteria=criteria,
        gold={"peer_count": len(peers), "median_ev_ebitda": med, "median_ev_revenue": med_rev},
        oracle={"tab": tab, "exclude": exclude, "path": path},
        signature=f"comps_out:{tab}:{exclude}",
    )


VALUATION_BOOK = "output/comps_valuation.xlsx"


def t_comps_valuation(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    """Two steps in one sandbox: a comps output, then a valuation that must take its multiple
    from that workbook (the earlier step's deliverable), not from the comps file again."""
    tab = _pick(list(TABS), variant)
    year = _pick([y for y in f.model.years if y.endswith("E")], variant // 2)
    drop = f.outliers[tab]
    peers = [p for p in f.comps[tab] if p.name != drop]
    med = round(_median(f, tab, drop), 2)
    if _tie(_median(f, tab, drop), 2):
        return None  # the workbook's rounded multiple would be ambiguous
    merger = f"merger/project_{f.code.lower()}_merger_model.xlsx"
    ebitda = f.model.value("ebitda", year)
    ev = med * ebitda
    equity = ev - f.net_debt
    per_share = equity / f.shares
    first = phrasing(
        rng,
        [
            f"Start a comps valuation workbook `{VALUATION_BOOK}` for {f.target}. From the "
            f"{tab} tab of the latest trading comps workbook, leave out {drop} and list every "
            "other peer with its EV/EBITDA computed from enterprise value and EBITDA, then the "
            "median multiple.",
            f"Open a comps valuation workbook `{VALUATION_BOOK}` for {f.target}: take the {tab} "
            f"tab of the latest trading comps workbook, drop {drop}, compute each remaining "
            "peer's EV/EBITDA from its enterprise value and EBITDA, and add the median.",
        ],
    )
    second = phrasing(
        rng,
        [
            f"Now value {f.target} in the same workbook. Apply the median EV/EBITDA as your "
            f"Comps sheet states it (2 decimals) to {year} EBITDA from the current "
            "three-statement model, subtract net debt at FY2024A from the model's balance "
            "sheet, and divide by the target's diluted shares in the merger model. Keep the "
            "Comps sheet as it is.",
            f"Next, add the valuation to your workbook: the median EV/EBITDA on your Comps "
            f"sheet (as rounded there) times {year} EBITDA of the current three-statement "
            "model gives enterprise value; less net debt at FY2024A from the model's balance "
            "sheet gives equity value; per share uses the target's diluted shares from the "
            "merger model. Leave the Comps sheet unchanged.",
        ],
    )
    comps = TaskSpec(
        template="banking.comps_valuation",
        kind="deliverable",
        title=f"Comps valuation of {f.target}: the {tab} comps",
        question=first,
        answer_keys={
            "peer_count": "number of peers on the Comps sheet",
            "median_ev_ebitda": "number, their median EV/EBITDA, 2 decimals",
        },
        deliverables={
            VALUATION_BOOK: 'a workbook with a sheet named "Comps". Row 1 holds the headers '
            '"Company", "EV/EBITDA"; one row per peer follows (company name in column A, the '
            'multiple as a number rounded to 2 decimals); then a row with "Median" in column A '
            "and the median multiple, rounded to 2 decimals."
        },
        criteria=[
            file_exists(VALUATION_BOOK, "Produces the valuation workbook"),
            *(
                xlsx_cell(
                    VALUATION_BOOK,
                    "Comps",
                    round(p.ev_ebitda, 2),
                    f"EV/EBITDA of {p.name}",
                    row_label=p.name,
                    column="EV/EBITDA",
                )
                for p in rng.sample(peers, 2)
            ),
            xlsx_cell(
                VALUATION_BOOK, "Comps", med, "Median row", row_label="Median", column="EV/EBITDA"
            ),
            numeric("peer_count", len(peers), "Counts the peers"),
        ],
        gold={"peer_count": len(peers), "median_ev_ebitda": med},
        oracle={"tab": tab, "exclude": drop, "year": year},
        signature="",
        evidence=[f.comps_file],
    )
    valuation = TaskSpec(
        template="banking.comps_valuation",
        kind="deliverable",
        title=f"Comps valuation of {f.target}: implied value on {year} EBITDA",
        question=second,
        answer_keys={
            "implied_ev": "number, implied enterprise value, $m",
            "per_share": "number, implied value per share, $",
        },
        deliverables={
            VALUATION_BOOK: 'the same workbook with a second sheet named "Valuation". Row 1 '
            'holds the headers "Item", "Value"; then one row each, label in column A and the '
            'number in column B: "Median EV/EBITDA", "EBITDA", "Enterprise Value", "Net Debt", '
            '"Equity Value", "Per Share" ($m, except the multiple and the value per share).'
        },
        criteria=[
            xlsx_cell(
                VALUATION_BOOK,
                "Comps",
                med,
                "Keeps the Comps sheet",
                row_label="Median",
                column="EV/EBITDA",
            ),
            xlsx_cell(
                VALUATION_BOOK,
                "Valuation",
                ebitda,
                f"Uses {year} EBITDA of the current model",
                row_label="EBITDA",
                column="Value",
            ),
            xlsx_cell(
                VALUATION_BOOK,
                "Valuation",
                f.net_debt,
                "Bridges with FY2024A net debt",
                row_label="Net Debt",
                column="Value",
            ),
            numeric("implied_ev", ev, "Implied enterprise value", rel_tol=1e-3),
            numeric("per_share", per_share, "Value per share", rel_tol=2e-3),
        ],
        gold={"implied_ev": ev, "per_share": per_share},
        oracle={"tab": tab, "exclude": drop, "year": year},
        signature="",
        evidence=[VALUATION_BOOK, f.model_file, merger],
    )
    return TaskSpec(
        template="banking.comps_valuation",
        kind="deliverable",
        title=f"Comps valuation of {f.target} on the {tab} tab, {year}",
        question=first + "\n\n" + second,
        answer_keys={},
        criteria=[],
        gold={"comps": comps.gold, "valuation": valuation.gold},
        oracle={"tab": tab, "exclude": drop, "year": year},
        signature=f"comps_valuation:{tab}:{year}",
        deliverables={VALUATION_BOOK: "the comps valuation workbook"},
        evidence=[f.comps_file, f.model_file, merger],
        steps=[("comps", comps), ("valuation", valuation)],
    )


def t_memo(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    kind = variant % 3
    path = "output/deal_update_memo.docx"
    offer = f.latest
    terms = _offer_terms(f, offer)
    purpose = ""
    answer: tuple[str, float, str] = ("offer_price", offer.price, "the latest offer price, $")
    if kind == 0:
        heading = f"Project {f.code}: revised offer terms"
        lines = [
            f"offer price per share: {offer.price:.2f}",
            f"implied equity value: {terms['equity_value']:.1f}",
            f"premium to unaffected price: {terms['premium_pct']:.1f}%",
        ]
        ask = (
            "the latest offer price per share (2 decimals), the implied equity value (offer "
            "price times the target's diluted shares in the board presentation, in $m, 1 "
            "decimal) and the premium to the unaffected share price (%, 1 decimal)"
        )
        if _tie(terms["premium_pct"], 1):
            return None
    elif kind == 1:
        _, _, purpose, tab = _pick(f.guidance, variant // 3)
        med = _median(f, tab, f.outliers[tab])
        heading = f"Project {f.code}: trading comparables"
        lines = [
            f"peer set: {tab}",
            f"excluded peer: {f.outliers[tab]}",
            f"median EV/EBITDA: {med:.2f}",
        ]
        ask = (
            f"the comps tab the team's email guidance says to use for {purpose}, the outlier "
            "#deal-team flagged on that tab, and the median EV/EBITDA of the remaining peers "
            "in the latest comps (2 decimals)"
        )
        answer = ("median_ev_ebitda", med, "the median EV/EBITDA, 2 decimals")
        if _tie(med, 2):
            return None
    else:
        heading = f"Project {f.code}: synergy case update"
        lines = [
            f"board presentation synergies: {f.offers[0].synergies}",
            f"latest synergies: {offer.synergies}",
            f"offer price per share: {offer.price:.2f}",
        ]
        ask = (
            "the run-rate synergies shown in the board presentation, the latest run-rate "
            "synergies from the deal emails (both in $m, whole numbers) and the latest offer "
            "price per share (2 decimals)"
        )
    statements = "; ".join(f'"{line.split(":")[0]}: ..."' for line in lines)
    key, value, desc = answer
    md, cfo, code = f.md.name, f"{f.cfo.name} ({f.cfo.title})", f.code
    question = phrasing(
        rng,
        [
            f"{md} wants a one-page Project {code} update memo for {cfo} covering {ask}.",
            f"Please draft the one-page Project {code} update memo that {md} wants for {cfo}. "
            f"It should cover {ask}.",
            f"{md} has asked for a one-page update memo on Project {code}, addressed to {cfo}, "
            f"covering {ask}.",
        ],
    )
    title = phrasing(rng, [heading, f"Update memo: {heading}"])
    return TaskSpec(
        template="banking.deal_memo",
        kind="deliverable",
        title=title,
        question=question,
        answer_keys={key: f"number, {desc}"},
        deliverables={
            path: (
                f'a Word document whose first heading (style "Heading 1") reads "{heading}", '
                "with one paragraph per statement, each written as label, colon, value: "
                f"{statements} (plain numbers: no currency signs or thousands separators)."
            )
        },
        criteria=[
            file_exists(path, "Produces the memo"),
            docx_has(path, heading, "Has the required heading", style="Heading 1", first=True),
            *[
                docx_has(
                    path, line, f"States the {line.split(':')[0]}", label=line.split(":")[0] + ":"
                )
                for line in lines
            ],
            numeric(key, value, f"Answers with {desc}", abs_tol=0.006),
        ],
        gold={key: value, "lines": lines},
        oracle={"heading": heading, "kind": kind, "purpose": purpose},
        signature=f"memo:{kind}:{lines[0]}",
        judged=[
            judge(
                path,
                f"Is this an update memo on Project {f.code} whose figures are the ones in the "
                "reference?",
                "; ".join(lines),
                "A reader of the memo gets the right figures",
            )
        ],
    )


def t_named(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    pairs = [("WACC", "TaxRate"), ("WACC", "TerminalGrowth"), ("TaxRate", "TerminalGrowth")]
    names = _pick(pairs, variant)
    value = {"WACC": f.model.wacc, "TaxRate": f.model.tax, "TerminalGrowth": f.model.tg}
    a, b, model = names[0], names[1], f.model_file
    question = phrasing(
        rng,
        [
            f"Open `{model}`. What values do the named ranges {a} and {b} hold? Give them in "
            "percent (0.0875 is 8.75).",
            f"What values do the named ranges {a} and {b} in `{model}` hold? Answer in percent "
            "(0.0875 is 8.75).",
            f"In `{model}`, read the named ranges {a} and {b} and give their values in percent "
            "(0.0875 is 8.75).",
        ],
    )
    title = phrasing(rng, [f"Named ranges {a} and {b}", f"Model inputs: named ranges {a} and {b}"])
    return TaskSpec(
        template="banking.starter_named_range",
        kind="fact",
        title=title,
        question=question,
        answer_keys={n.lower(): f"number, {n} in percent" for n in names},
        criteria=[numeric(n.lower(), value[n], f"Reads {n}", abs_tol=0.006) for n in names],
        gold={n.lower(): value[n] for n in names},
        oracle={"names": list(names)},
        signature=f"named:{'+'.join(names)}",
    )


TEMPLATES = [
    Template("banking.model_line_item", "fact", t_line_item, ("standard", "starter")),
    Template("banking.model_line_item_unsupported", "fact", t_line_item_unsupported, held_out=True),
    Template("banking.dcf_valuation", "compute", t_dcf),
    Template("banking.comps_stats", "compute", t_comps_stats, ("standard", "starter")),
    Template("banking.implied_value", "compute", t_implied, held_out=True),
    Template("banking.peer_guidance", "multi_hop", t_guidance),
    Template("banking.revised_offer", "reconcile", t_revised_offer, ("standard", "starter")),
    Template("banking.revised_accretion", "reconcile", t_revised_accretion, held_out=True),
    Template("banking.bid_deadline_terms", "reconcile", t_bid_deadline),
    Template("banking.merger_accretion", "fact", t_merger),
    Template("banking.valuation_range", "fact", t_range),
    Template("banking.cim_segment", "fact", t_segment, ("standard", "starter")),
    Template("banking.cim_profile", "fact", t_profile),
    Template("banking.comps_output", "deliverable", t_comps_output, held_out=True),
    Template("banking.deal_memo", "deliverable", t_memo),
    Template("banking.comps_valuation", "deliverable", t_comps_valuation),
    Template("banking.starter_named_range", "fact", t_named, ("starter",)),
]
TEMPLATES += brief_templates("banking", TEMPLATES, lambda f: f.md.name)
