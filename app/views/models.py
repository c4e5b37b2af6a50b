"""Model files of a version, and one model: the flags it reads directly and through chains,
and the constraint sites that test its architecture names."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlmodel import Session

from app.deps import SessionDep
from app.templating import render
from app.views.common import errors, page_context
from kb.contract import ModelList, ModelPage
from kb.queries import get_version
from kb.reach import model_detail, models_list
from kb.schema import Version

router = APIRouter()


def model_list_data(session: Session, version: Version) -> ModelList:
    return ModelList.model_validate(
        {"version": version.name, "models": models_list(session, version)}
    )


@router.get("/v/{version}/models", include_in_schema=False)
def models_page(request: Request, session: SessionDep, version: str) -> Response:
    found = get_version(session, version)
    data = model_list_data(session, found)
    return render(request, "models.html", {**page_context(session, found, "models"), "data": data})


@router.get("/api/v/{version}/models", responses=errors(404))
def api_models(session: SessionDep, version: str) -> ModelList:
    """Model files (python/sglang/srt/models/), their EntryClass architectures and how many
    flags each reads, directly or through a chain."""
    return model_list_data(session, get_version(session, version))


def model_data(session: Session, version: Version, name: str) -> ModelPage:
    return ModelPage.model_validate(
        {"version": version.name, **model_detail(session, version, name)}
    )


@router.get("/v/{version}/models/{name:path}", include_in_schema=False)
def model_page(request: Request, session: SessionDep, version: str, name: str) -> Response:
    found = get_version(session, version)
    data = model_data(session, found, name)
    context = {**page_context(session, found, f"models/{data.name}"), "model": data}
    return render(request, "model.html", context)


@router.get("/api/v/{version}/models/{name:path}", responses=errors(404))
def api_model(session: SessionDep, version: str, name: str) -> ModelPage:
    """One model file (by file name or architecture): the flags it reads directly and through
    chains, and the constraint sites that test its architecture names."""
    return model_data(session, get_version(session, version), name)
