"""The GPU catalog (kb/gpus.py): a page and its JSON twin, with every fact's source."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.templating import render
from kb.contract import GpuList
from kb.gpus import gpu_list

router = APIRouter()


@router.get("/gpus", include_in_schema=False)
def gpus_page(request: Request) -> Response:
    return render(request, "gpus.html", {"data": gpu_list()})


@router.get("/api/gpus")
def api_gpus() -> GpuList:
    """The GPUs (and an NPU) the deployment simulation knows: compute capability, nominal
    and reported memory, torch device name and a toolkit version, each fact with its source."""
    return gpu_list()
