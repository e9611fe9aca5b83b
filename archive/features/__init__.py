"""The archive's features, side by side: sessions, evidence, summaries, memory, task state and
API keys. Each stands on the rules and the storage; none imports another (a contract in
pyproject.toml): what two of them share lives a floor down.
"""
