"""The records the pages of evidence, memory, summaries and search are tested on: a vet clinic's
formulary entry corrected twice and then retracted, a pet's diet remembered and corrected, a lab
result, and a summary derived from them. Written on the test's own clock, days apart, so the
versions stand apart on a time axis and `as_of` has moments to pick between. The clock starts
two weeks back, so all of it is past when it is read: the search index reads the machine's own
time (retrieval is a layer apart from the archive's clock), and finds only what was recorded
before its now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from console_helpers import Tenant
from fakes import ManualWallClock

from mnemo_sea.archive import EvidenceInput, EvidenceRecord, MemoryFact, Summary

DOSE = "formulary/amoxicillin#dose.v2"  # an id with / # . in it, as ids may have
REFUND = "kb/refund-policy@2026:eu"
DIET = ("pet-7", "diet/main")  # a memory key with / in it
# How far back the clinic's records start: they span ten days.
DAYS_BACK = 14
# A body in Chinese and with markup in it: both must come back exactly, never interpreted.
CHINESE_BODY = "阿莫西林：每公斤 10 毫克，每日两次。<b>&amp;</b>\n第二行"


@dataclass(frozen=True)
class Clinic:
    """What `clinic` wrote: the dose's versions oldest first, the diet's chain, the summary, and
    moments around them."""

    dose: list[EvidenceRecord]
    diet: list[MemoryFact]
    summary: Summary
    started: datetime  # just before the first version was recorded
    retracted_at: datetime


def clinic(tenant: Tenant, clock: ManualWallClock) -> Clinic:
    p = tenant.principal()
    mnemo = tenant.mnemo
    clock.now = datetime.now(UTC) - timedelta(days=DAYS_BACK)
    started = clock.now
    mnemo.ingest(
        p,
        [
            EvidenceInput(
                CHINESE_BODY,
                "formulary.pdf",
                evidence_id=DOSE,
                statement="Amoxicillin: 10 mg/kg twice daily",
                locator="p. 12",
            ),
            EvidenceInput("Refunds within 14 days of purchase.", "policy.md", evidence_id=REFUND),
        ],
    )
    clock.advance(3 * 86400)
    mnemo.ingest(
        p,
        [
            EvidenceInput(
                "Amoxicillin: 12.5 mg/kg twice daily (revised).",
                "formulary.pdf",
                evidence_id=DOSE,
                statement="Amoxicillin: 12.5 mg/kg twice daily",
                locator="p. 12",
            )
        ],
    )
    clock.advance(4 * 86400)
    mnemo.ingest(
        p,
        [
            EvidenceInput(
                "Amoxicillin: 20 mg/kg twice daily.",
                "formulary-draft.pdf",
                evidence_id=DOSE,
                statement="Amoxicillin: 20 mg/kg twice daily",
                valid_until=clock.now + timedelta(days=30),
            )
        ],
    )
    mnemo.record(p, "visit-1", "lab", "ALT 112 U/L (high)\nrecheck in 2 weeks\n", owner="pet-7")
    owner, key = DIET
    mnemo.remember(p, owner, key, "kibble", "user_claim", derived_from=f"evidence:{DOSE}")
    clock.advance(3600)
    mnemo.remember(p, owner, key, "wet food", "user_correction", derived_from="result:visit-1/r1")
    clock.advance(3600)
    mnemo.remember(p, owner, key, "wet food, no chicken", "user_correction")
    mnemo.remember(p, owner, "weight", "12.4 kg", "tool_fact", derived_from="result:visit-1/r1")
    mnemo.remember(p, "pet-8", "diet", "raw", "user_claim")
    summary = mnemo.create_summary(
        p,
        "Pet 7 eats wet food without chicken; ALT was high at the first visit.\n"
        "The amoxicillin dose in the formulary changed twice.",
        [f"evidence:{DOSE}", "result:visit-1/r1"],
        trace_ref="trace://visit-1/step-4",
    )
    clock.advance(2 * 86400)
    mnemo.retract(p, DOSE, "a draft, never approved")
    dose = mnemo.evidence_history(p, DOSE)
    assert dose[-1].ended_at is not None
    return Clinic(dose, mnemo.memory_history(p, owner, key), summary, started, dose[-1].ended_at)
