"""LlamaIndex parts of contextual-retrieval (thin adapters over `contextual_retrieval`).

Install with ``pip install 'contextual-retrieval[llamaindex]'``. The parts arrive in a later
release: ContextualNodeParser, HybridRetriever and a rerank postprocessor.
"""

__all__: list[str] = []
