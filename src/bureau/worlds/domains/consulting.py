"""Management consulting: a consultancy's market assessment for the world's company.

Files: market-sizing decks (the final v2 and a superseded v1 with stale numbers), a customer
survey workbook with a formula summary and named ranges (plus a preliminary extract), interview
notes, an industry outlook PDF with two-column text and a ruled table (plus a draft), a signed
statement of work with a ruled milestone table (plus a draft), change requests, client mail that
revises growth assumptions and asks about slides and interviews, and an #engagement channel.
The content is drawn in `consulting_model`, written to files by `consulting_files`, and asked
about by the templates in `consulting_tasks`.
"""

from __future__ import annotations

from ..fabric import CONSULTANCIES, FIRST, LAST, Person, slug, split_part
from ..spec import WorldContext
from .consulting_files import (
    write_change_requests,
    write_chat,
    write_deck,
    write_deck_mails,
    write_draft_report,
    write_industry,
    write_interview_mails,
    write_interviews,
    write_milestone_calendar,
    write_revisions,
    write_sow_draft,
    write_sow_pdf,
    write_survey,
)
from .consulting_model import (
    DECK_V1,
    DECK_V2,
    MARKETS,
    REGIONS,
    SEGMENTS,
    SURVEY,
    SURVEY_PRELIM,
    ConsultingFacts,
    milestones,
    preliminary,
    respondents,
    shares,
    sizing,
)
from .consulting_tasks import TEMPLATES

__all__ = ["TEMPLATES", "ConsultingFacts", "build"]


def build(ctx: WorldContext) -> ConsultingFacts:
    rng = ctx.rng
    starter = ctx.difficulty == "starter"
    firm = rng.choice(CONSULTANCIES)
    firm_domain = slug(firm.split()[0]) + ".example.com"
    pairs = rng.sample([(f, last) for f in FIRST for last in split_part(LAST, ctx.split)], 16)
    staff = ["Partner", "Engagement Manager", "Consultant", "Business Analyst"]
    team = [Person(f, la, t, firm_domain) for (f, la), t in zip(pairs[:4], staff, strict=True)]
    client = [
        Person(f, la, t, ctx.email_domain)
        for (f, la), t in zip(pairs[4:6], ["Chief Strategy Officer", "CFO"], strict=True)
    ]
    own = split_part(SEGMENTS, ctx.split)
    chosen = rng.sample(own, 4)
    segments = [s for s in own if s in chosen]
    regions = split_part(REGIONS, ctx.split)
    tam, growth = sizing(rng, segments)
    facts = ConsultingFacts(
        ctx=ctx,
        firm=firm,
        partner=team[0],
        manager=team[1],
        analysts=team[2:],
        sponsor=client[0],
        cfo=client[1],
        market=MARKETS.get(ctx.company.split()[-1], "adjacent services"),
        segments=segments,
        regions=regions,
        tam=tam,
        growth=growth,
        sam={
            s: [round(v * f, 1) for v in tam[s]]
            for s, f in zip(segments, [rng.randint(30, 65) / 100 for _ in segments], strict=True)
        },
        shares=shares(rng, regions),
        survey=respondents(rng, segments, regions, 40 if starter else 120),
        interviewees=[],
        milestones=milestones(rng, ctx.split),
    )
    names = [f"{f} {la}" for f, la in pairs[6:]]
    write_interviews(ctx, facts, names, 1 if starter else 2)
    write_deck(ctx, DECK_V2, facts, tam, facts.sam, growth, facts.shares, 2)
    write_survey(ctx, SURVEY, facts.survey, segments)
    write_sow_pdf(ctx, facts)
    if starter:
        write_revisions(ctx, facts, 1)
        return facts
    stale_tam = {
        s: [round(v * rng.choice([0.88, 0.92, 1.07, 1.12]), 1) for v in tam[s]] for s in segments
    }
    stale_growth = {s: g + rng.choice([-1.5, -1.0, 1.0, 1.5]) for s, g in growth.items()}
    stale_sam = {s: [round(v * 0.5, 1) for v in stale_tam[s]] for s in segments}
    write_deck(ctx, DECK_V1, facts, stale_tam, stale_sam, stale_growth, shares(rng, regions), 1)
    write_survey(ctx, SURVEY_PRELIM, preliminary(rng, facts.survey), segments)
    write_industry(ctx, facts)
    write_sow_draft(ctx, facts)
    write_draft_report(ctx, facts, stale_tam, stale_growth)
    write_deck_mails(ctx, facts)
    write_revisions(ctx, facts, 2)
    write_change_requests(ctx, facts)
    write_interview_mails(ctx, facts)
    write_chat(ctx, facts)
    write_milestone_calendar(ctx, facts)
    return facts
