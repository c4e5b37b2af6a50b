"""Backend values side by side (requirements, side effects, handling sites by area and
file), and the extraction report of a version (counts, ambiguous choice sites, warnings)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from app.deps import SessionDep
from app.templating import render
from app.views.common import errors, page_context
from kb.contract import Compare, Report
from kb.flagsites import chain_reads
from kb.queries import MAX_NAME, flag_url, get_version
from kb.reach import backend_version, compare_values, report
from kb.schema import Version

router = APIRouter()


def _values(values: str) -> list[str]:
    return [v for v in values[: MAX_NAME * 4].split(",") if v.strip()][:6]


def compare_data(session: Session, version: Version, flag: str, values: str) -> Compare:
    body = compare_values(session, version, flag, _values(values))
    # A site the flag's value reaches through a chain (`get_x().is_y()`) says which: the
    # flag page's "Read through a chain" list, read by the same function.
    reads = chain_reads(session, version, body["dest"])
    through = {(r["path"], r["line"]): r["via"] for r in reads}
    for row in body["rows"]:
        lines = {s["line"] for sites in row["cells"].values() for s in sites}
        row["via"] = {
            str(line): through[(row["path"], line)]
            for line in sorted(lines)
            if (row["path"], line) in through
        }
    body["chain_reads"] = len(reads)
    body["chain_url"] = f"{flag_url(version, body['flag'])}#indirect"
    return Compare.model_validate({"version": version.name, **body})


@router.get("/v/{version}/backends/{flag}/compare", include_in_schema=False)
def compare_page(
    request: Request, session: SessionDep, version: str, flag: str, values: str = ""
) -> Response:
    found = backend_version(session, version, flag, _values(values), compare=True)
    data = compare_data(session, found, flag, values)
    page = f"backends/{data.flag}/compare"  # the switcher carries `?values=` apart
    return render(request, "compare.html", {**page_context(session, found, page), "data": data})


@router.get("/api/v/{version}/backends/{flag}/compare", responses=errors(404))
def api_compare(session: SessionDep, version: str, flag: str, values: str = "") -> Compare:
    """Values of a flag side by side: what each requires, what it switches, and the sites
    handling each, one row per area and file (`values=a,b[,c]`)."""
    found = backend_version(session, version, flag, _values(values), compare=True)
    return compare_data(session, found, flag, values)


def report_data(version: Version) -> Report:
    return Report.model_validate(report(version))


@router.get("/v/{version}/report", include_in_schema=False)
def report_page(request: Request, session: SessionDep, version: str) -> Response:
    found = get_version(session, version)
    context = {**page_context(session, found, "report"), "report": report_data(found)}
    return render(request, "report.html", context)


@router.get("/api/v/{version}/report", responses=errors(404))
def api_report(session: SessionDep, version: str) -> Report:
    """The extraction report of a version: counts, choice sites and how many are ambiguous
    (per way of recognising them), and the constructs the extractor did not understand."""
    return report_data(get_version(session, version))
