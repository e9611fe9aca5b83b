"""mnemo-sea inside RAG frameworks: retrievers for LangChain and LlamaIndex.

    langchain    `MnemoRetriever`, a langchain-core BaseRetriever     (extra `[langchain]`)
    llama_index  `MnemoRetriever`, a llama-index-core BaseRetriever   (extra `[llama-index]`)
    openai_agents `MnemoSession`, an OpenAI Agents SDK Session over the session archive
                 (extra `[openai-agents]`)
    search       what both share: the searcher protocol, the in-process adapter, the filters,
                 what a hit becomes (text, metadata, a stable id) and the citation of a hit

Each framework is imported only by its own module, so `import mnemo_sea` and this package
never load either; importing a module whose framework is missing raises ImportError naming the
extra to install.
"""
