"""Where the benchmarks find the cookbook data: $CONTEXTUAL_RETRIEVAL_DATASET, else ../shared beside the repo."""

from __future__ import annotations

import os
from pathlib import Path

from contextual_retrieval_core.app.evaluation import DATASET_ENV

HERE = Path(__file__).resolve().parent
DEFAULT_DATASET = os.environ.get(DATASET_ENV) or str(HERE.parent.parent / "shared" / "data" / "cookbook-codebase")
