"""The command line (`contextual-retrieval`), its error messages, the demo and the evaluations.

What users import from this stage; each name is imported on first use (the modules behind them
stay importable by their own paths). `python -m contextual_retrieval_core.app.pgvector_server`
starts a local PostgreSQL server with pgvector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.app.cli import build_parser, main
    from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS, DEMO_QUERIES, DemoQuery
    from contextual_retrieval_core.app.demo_frames import DEMO_CROP_QUERIES, CropQuery, DemoFrames, write_demo_frames
    from contextual_retrieval_core.app.evaluation import (
        ConfigResult,
        EvalDataset,
        EvalQuery,
        evaluate,
        load_contexts_jsonl,
        load_cookbook,
        load_cookbook_chunks,
        mrr,
        pass_at_k,
        recall_at_k,
    )
    from contextual_retrieval_core.app.question_eval import (
        CostEstimate,
        GeneratedQuestion,
        OwnCorpusEvaluation,
        QuestionSet,
        estimate_cost,
        evaluate_own_corpus,
        generate_questions,
        load_corpus,
        write_evaluation_set,
    )

__all__ = [
    "DEMO_CROP_QUERIES",
    "DEMO_DOCUMENTS",
    "DEMO_QUERIES",
    "ConfigResult",
    "CostEstimate",
    "CropQuery",
    "DemoFrames",
    "DemoQuery",
    "EvalDataset",
    "EvalQuery",
    "GeneratedQuestion",
    "OwnCorpusEvaluation",
    "QuestionSet",
    "build_parser",
    "estimate_cost",
    "evaluate",
    "evaluate_own_corpus",
    "generate_questions",
    "load_contexts_jsonl",
    "load_cookbook",
    "load_cookbook_chunks",
    "load_corpus",
    "main",
    "mrr",
    "pass_at_k",
    "recall_at_k",
    "write_demo_frames",
    "write_evaluation_set",
]

_CLI = "contextual_retrieval_core.app.cli"
_CORPUS = "contextual_retrieval_core.app.demo_corpus"
_FRAMES = "contextual_retrieval_core.app.demo_frames"
_EVAL = "contextual_retrieval_core.app.evaluation"
_QUESTIONS = "contextual_retrieval_core.app.question_eval"
__getattr__, __dir__ = lazy_exports(globals(), {
    "DEMO_CROP_QUERIES": _FRAMES,
    "DEMO_DOCUMENTS": _CORPUS,
    "DEMO_QUERIES": _CORPUS,
    "ConfigResult": _EVAL,
    "CostEstimate": _QUESTIONS,
    "CropQuery": _FRAMES,
    "DemoFrames": _FRAMES,
    "DemoQuery": _CORPUS,
    "EvalDataset": _EVAL,
    "EvalQuery": _EVAL,
    "GeneratedQuestion": _QUESTIONS,
    "OwnCorpusEvaluation": _QUESTIONS,
    "QuestionSet": _QUESTIONS,
    "build_parser": _CLI,
    "estimate_cost": _QUESTIONS,
    "evaluate": _EVAL,
    "evaluate_own_corpus": _QUESTIONS,
    "generate_questions": _QUESTIONS,
    "load_contexts_jsonl": _EVAL,
    "load_cookbook": _EVAL,
    "load_cookbook_chunks": _EVAL,
    "load_corpus": _QUESTIONS,
    "main": _CLI,
    "mrr": _EVAL,
    "pass_at_k": _EVAL,
    "recall_at_k": _EVAL,
    "write_demo_frames": _FRAMES,
    "write_evaluation_set": _QUESTIONS,
})
