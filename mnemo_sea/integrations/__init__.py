"""mnemo-sea inside RAG frameworks and agent runtimes.

    langchain       `MnemoRetriever`, a langchain-core BaseRetriever     (extra `[langchain]`)
    llama_index     `MnemoRetriever`, a llama-index-core BaseRetriever   (extra `[llama-index]`)
    langchain_vectorstore, llama_index_vectorstore
                    `MnemoVectorStore`, each framework's vector store over ingest and hybrid search
    documents       what both vector stores share: a document as an evidence record, the filters
    langgraph       `MnemoStore`, LangGraph's BaseStore over memory facts  (extra `[langgraph]`)
    store_items     the LangGraph store's codec: namespaces as owners, values as JSON, filters
    openai_agents   `MnemoSession`, an OpenAI Agents SDK Session over the session archive
                    (extra `[openai-agents]`)
    claude_memory   `MnemoMemoryTool`, Claude's memory tool backend      (extra `[anthropic]`)
    claude_context  reversible context editing of a Messages API conversation (no extra)
    handles         who an adapter acts through: mnemo.as_(principal), AsyncMnemo, or the client
    plans           an operation written once as handle calls, run blocking or awaited
    search          what the retrievers share: the searcher protocol, the in-process adapter, the filters,
                    what a hit becomes (text, metadata, a stable id) and the citation of a hit

Each framework is imported only by its own module, so `import mnemo_sea` and this package
never load either; importing a module whose framework is missing raises ImportError naming the
extra to install.
"""
