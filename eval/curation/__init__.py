"""The context-curation experiment behind `mnemo-sea eval context`: scripted traces replayed
under several ways of handling old tool results, every prompt rendered by the context assembler."""
