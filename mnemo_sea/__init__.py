"""mnemo-sea: a Session Evidence Archive plus hybrid retrieval for tool-using LLM agents."""

__version__ = "0.1.0"
