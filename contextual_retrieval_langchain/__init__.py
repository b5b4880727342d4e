"""LangChain parts of contextual-retrieval (thin adapters over `contextual_retrieval`).

Install with ``pip install 'contextual-retrieval[langchain]'``. The parts arrive in a later
release: ContextualDocumentTransformer, ContextualEnsembleRetriever and a rerank compressor.
"""

__all__: list[str] = []
